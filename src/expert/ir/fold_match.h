// The matchers of FoldSummedProducts (fold.h): what a fold reads and removes, found in the captured graph.
// Internal to ir/fold*.cpp.
#pragma once

#include <optional>
#include <vector>

#include "expert/ir/graph.h"

namespace egg::expert::fold_detail {

// A tensor added along the chain: coefficient * sum(value) is its share of every row's sum.
struct Term {
  double coefficient = 1;
  int value = -1;
};

// One fold, matched. A sum over a product's columns: the product A @ B, the nodes from it to the reduction
// (every one removed from the graph), and the linear form the chain applies, alpha * product + terms +
// constant, summed. A pooled transposed convolution: its input (a), weight (b) and bias, the positions it
// pools, and the per-channel affine ops between it and the pooling, applied again after it.
struct Fold {
  bool convolution = false;
  int a = -1;
  int b = -1;
  std::vector<int> nodes;  // product, chain, reduction
  int reduce = -1;         // the reduction node, whose value the folded form replaces
  double alpha = 1;
  std::vector<Term> terms;
  double constant = 0;  // numbers added, already summed over the N columns
  int bias = -1;
  int64_t positions = 0;
  bool mean = false;
  std::vector<int> chain;
  // A pooled transposed convolution that crops (padding) or pads (output padding) its output: per position
  // dim, the [input size x kernel taps] indicator of the pairs whose product lands inside the output (row
  // major), or empty where every pair does.
  std::vector<std::vector<double>> windows;
  // The position dims pooled, the leading ones: all of them, or fewer (the rest a smaller convolution).
  int pooled = 0;
  bool Partial() const { return pooled < static_cast<int>(windows.size()); }
};

// A sum over a product's columns reached from `node` (a matrix product), or nullopt.
std::optional<Fold> MatchSummedProduct(const Graph& graph, const Node& node);
// A pooled transposed convolution reached from `node`, or nullopt.
std::optional<Fold> MatchPooledConvolution(const Graph& graph, const Node& node);

}  // namespace egg::expert::fold_detail
