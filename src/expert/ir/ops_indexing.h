// The op table's integer and indexing part (ir/ops.h reads it): bitwise ops on bools and integers, the ops
// that read their input at computed positions (embedding, interpolation), and sort and topk.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "expert/ir/ops.h"

namespace egg::expert {

// Adds these ops' classes to `table`.
void AddIndexingClasses(std::map<std::string, OpClass>* table);

// `a symbol b` (&, | or ^) of two operands taken as booleans, a boolean: through int8 where neither is a
// literal (Triton's interpreter refuses `&` between a scalar boolean, a value read at a fixed address, and a
// tile of them; compiled code takes either form).
std::string BoolCombine(const Operand& a, const std::string& symbol, const Operand& b);

// The Triton expression of a bitwise op (and, or, xor of bools or integers), nullopt for any other op.
std::optional<std::string> LowerBitwise(const Node& node, const std::vector<Operand>& operands, DType out);

}  // namespace egg::expert
