#include "expert/codegen/dynamic_batch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "expert/codegen/size_form.h"

namespace egg::expert {
namespace {

// The farthest sample: every floor division by a divisor of it shows as a size that is not linear.
constexpr int64_t kFarSample = 1024;

struct Token {
  enum class Kind { kIdent, kNumber, kString, kOther };
  Kind kind = Kind::kOther;
  size_t begin = 0;  // [begin, end) in the source
  size_t end = 0;
  int line = 1;
  int column = 0;        // of the token's first character
  bool first = false;    // the first token of its line
  bool comment = false;  // inside a # comment
  bool integer = false;  // kNumber: digits only
};

bool IdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool Digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The end of the string literal that starts at `i` (single, double or triple quotes, backslash escapes).
size_t StringEnd(const std::string& text, size_t i) {
  const char quote = text[i];
  const bool triple = text.compare(i, 3, std::string(3, quote)) == 0;
  const std::string close(triple ? 3 : 1, quote);
  size_t j = i + close.size();
  while (j < text.size() && text.compare(j, close.size(), close) != 0) {
    j += text[j] == '\\' ? size_t{2} : size_t{1};
  }
  return std::min(text.size(), j + close.size());
}

// The end of the number that starts at `i`: digits, a fraction, an exponent (1000, 0.125, 1e-05, 0x1f); in
// "32x40" (a comment's shape) the number is 32.
size_t NumberEnd(const std::string& text, size_t i) {
  auto digits = [&](size_t j, bool hex) {
    while (j < text.size() &&
           (Digit(text[j]) || (hex && std::isxdigit(static_cast<unsigned char>(text[j])) != 0))) {
      ++j;
    }
    return j;
  };
  if (text.compare(i, 2, "0x") == 0 && i + 2 < text.size() &&
      std::isxdigit(static_cast<unsigned char>(text[i + 2])) != 0) {
    return digits(i + 2, true);
  }
  size_t j = digits(i, false);
  if (j < text.size() && text[j] == '.') {
    j = digits(j + 1, false);
  }
  if (j + 1 < text.size() && (text[j] == 'e' || text[j] == 'E')) {
    const size_t sign = (text[j + 1] == '+' || text[j + 1] == '-') ? j + 2 : j + 1;
    if (sign < text.size() && Digit(text[sign])) {
      j = digits(sign, false);
    }
  }
  return j;
}

std::vector<Token> Tokenize(const std::string& text) {
  std::vector<Token> tokens;
  int line = 1;
  size_t line_start = 0;
  bool comment = false;
  bool line_has_token = false;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      comment = false;
      line_has_token = false;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    Token token;
    token.begin = i;
    token.line = line;
    token.column = static_cast<int>(i - line_start);
    token.first = !line_has_token;
    token.comment = comment || c == '#';
    if (c == '#') {
      comment = true;
      token.end = i + 1;
    } else if ((c == '"' || c == '\'') && !comment) {
      token.kind = Token::Kind::kString;
      token.end = StringEnd(text, i);
    } else if (comment && c == 'x' && i + 1 < text.size() && Digit(text[i + 1])) {
      token.end = i + 1;  // a comment's shape, "[96x512]": the x apart, so that 512 is a number
    } else if (IdentStart(c)) {
      token.kind = Token::Kind::kIdent;
      token.end = i;
      while (token.end < text.size() && IdentChar(text[token.end])) {
        ++token.end;
      }
    } else if (Digit(c) || (c == '.' && i + 1 < text.size() && Digit(text[i + 1]))) {
      token.kind = Token::Kind::kNumber;
      token.end = NumberEnd(text, i);
      token.integer = true;
      for (size_t j = i; j < token.end; ++j) {
        token.integer = token.integer && Digit(text[j]);
      }
    } else {
      token.end = i + 1;
    }
    for (size_t j = i; j < token.end; ++j) {  // a string or comment over several lines
      if (text[j] == '\n') {
        ++line;
        line_start = j + 1;
      }
    }
    line_has_token = true;
    i = token.end;
    tokens.push_back(token);
  }
  return tokens;
}

// Where a token sits in the candidate file: a @triton.jit function, a Python function or method, or neither.
struct Scope {
  bool jit = false;
  std::string function;  // "" at module level
};

// The scope of every token: a `def` at column 0 opens a function (jit when @triton.jit precedes it), a `def`
// one level into `class ModelNew` a method (a `def` deeper in, as forward's `_make_` functions, is its
// method's); any other statement at column 0 returns to module level.
std::vector<Scope> Scopes(const std::string& text, const std::vector<Token>& tokens) {
  std::vector<Scope> scopes(tokens.size());
  Scope current;
  bool in_class = false;
  bool jit_next = false;
  auto word = [&](size_t k) {
    return k < tokens.size() ? text.substr(tokens[k].begin, tokens[k].end - tokens[k].begin) : std::string();
  };
  for (size_t k = 0; k < tokens.size(); ++k) {
    const Token& token = tokens[k];
    if (token.first && !token.comment && token.column == 0) {
      const std::string head = word(k);
      if (head == "@") {
        jit_next = jit_next || (word(k + 1) == "triton" && word(k + 3) == "jit");
      } else if (head == "def") {
        current = {jit_next, word(k + 1)};
        in_class = false;
        jit_next = false;
      } else {
        in_class = head == "class";
        current = {};
      }
    } else if (token.first && !token.comment && in_class && token.column == 4 && word(k) == "def") {
      current = {false, word(k + 1)};
    }
    scopes[k] = current;
  }
  return scopes;
}

class Merger {
 public:
  Merger(const std::vector<BatchSample>& samples, const std::vector<int64_t>& tops)
      : samples_(samples), tops_(tops) {
    for (const BatchSample& sample : samples) {
      tokens_.push_back(Tokenize(sample.source));
    }
    for (size_t i = 0; i < tops.size(); ++i) {
      names_.push_back(DynamicSizeName(i));
    }
  }

  MergedSource Merge() {
    scopes_ = Scopes(samples_[0].source, tokens_[0]);
    if (!Compare() || !Place()) {
      return {std::nullopt, problem_, form_changed_};
    }
    return {Write(), ""};
  }

 private:
  std::string Text(size_t sample, size_t k) const {
    const Token& token = tokens_[sample][k];
    return samples_[sample].source.substr(token.begin, token.end - token.begin);
  }

  // The line of sample `sample` that holds its token `k` (its last token's past the end), unindented and cut
  // at 120 characters.
  std::string LineOf(size_t sample, size_t k) const {
    const std::string& source = samples_[sample].source;
    const std::vector<Token>& tokens = tokens_[sample];
    const size_t at = tokens.empty() ? 0 : tokens[std::min(k, tokens.size() - 1)].begin;
    const size_t newline = at == 0 ? std::string::npos : source.rfind('\n', at - 1);
    const size_t start = newline == std::string::npos ? 0 : newline + 1;
    std::string line = source.substr(start, source.find('\n', at) - start);
    const size_t indent = line.find_first_not_of(' ');
    line = indent == std::string::npos ? line : line.substr(indent);
    return line.substr(0, 120);
  }

  // "batch" and "8" for one dynamic size, "sizes" and "8x12" for several.
  std::string Label() const { return tops_.size() == 1 ? "batch" : "sizes"; }
  std::string Sizes(size_t s) const { return fmt::format("{}", fmt::join(samples_[s].sizes, "x")); }

  bool Fail(size_t k, const std::string& what) {
    problem_ = fmt::format("{} (line {}: {})", what, tokens_[0][k].line, LineOf(0, k));
    return false;
  }

  // Where sample `s` first differs from sample 0 other than in an integer literal (its token count).
  size_t FirstChange(size_t s) const {
    const size_t common = std::min(tokens_[0].size(), tokens_[s].size());
    for (size_t k = 0; k < common; ++k) {
      const bool integers = tokens_[0][k].integer && tokens_[s][k].integer;
      if (!integers && Text(s, k) != Text(0, k)) {
        return k;
      }
    }
    return common;
  }

  // Every sample has the same tokens but for integer literals, each of which is linear in the batch.
  bool Compare() {
    for (size_t s = 1; s < samples_.size(); ++s) {
      if (tokens_[s].size() != tokens_[0].size()) {
        const size_t k = FirstChange(s);
        form_changed_ = true;
        problem_ =
            fmt::format("the generated code changes form between {} {} and {} (`{}` at {}, `{}` at {})",
                        Label(), Sizes(0), Sizes(s), LineOf(0, k), Sizes(0), LineOf(s, k), Sizes(s));
        return false;
      }
    }
    for (size_t k = 0; k < tokens_[0].size(); ++k) {
      bool same = true;
      for (size_t s = 1; s < samples_.size(); ++s) {
        same = same && Text(s, k) == Text(0, k);
      }
      if (same) {
        continue;
      }
      if (tokens_[0][k].kind != Token::Kind::kNumber || !tokens_[0][k].integer) {
        form_changed_ = true;
        return Fail(k, fmt::format("the generated code changes form with the {}: `{}` at {} {}",
                                   tops_.size() == 1 ? "batch" : "sizes", Text(0, k), Label(), Sizes(0)));
      }
      if (!Fit(k)) {
        return false;
      }
    }
    return true;
  }

  bool Fit(size_t k) {
    std::vector<int64_t> values;
    for (size_t s = 0; s < samples_.size(); ++s) {
      if (tokens_[s][k].kind != Token::Kind::kNumber || !tokens_[s][k].integer) {
        form_changed_ = true;
        return Fail(k, "the generated code changes form with the batch");
      }
      values.push_back(std::stoll(Text(s, k)));
    }
    const std::optional<SizeForm> form = FitForm(values);
    if (!form) {
      return Fail(k,
                  fmt::format("a size is neither linear nor quadratic in the {} ({} at {} {}, {} at {} {})",
                              tops_.size() == 1 ? "batch" : "dynamic sizes", values[0], Label(), Sizes(0),
                              values[off_], Label(), Sizes(off_)));
    }
    if (FormAt(*form, tops_) > std::numeric_limits<int32_t>::max()) {
      return Fail(k, fmt::format("a size reaches 2^31 at {} {}", Label(), fmt::join(tops_, "x")));
    }
    forms_[k] = *form;
    return true;
  }

  std::optional<SizeForm> FitForm(const std::vector<int64_t>& values) {
    std::vector<std::vector<int64_t>> points;
    for (const BatchSample& sample : samples_) {
      points.push_back(sample.sizes);
    }
    return FitSizeForm(points, values, tops_, &off_);
  }

  // Every batch-dependent literal is where egg_B is defined: a jit function (which then takes it), the guard
  // or forward; in egg_precompile the largest batch's value stands (a specialization hint); comments say B.
  bool Place() {
    static const std::set<std::string> kPythonScopes = {"_egg_specialized", "forward", "_egg_forward"};
    for (const auto& [k, form] : forms_) {
      const Scope& scope = scopes_[k];
      if (tokens_[0][k].comment || scope.function == "egg_precompile") {
        continue;
      }
      if (scope.jit) {
        takes_batch_.insert(scope.function);
      } else if (kPythonScopes.count(scope.function) == 0) {
        return Fail(k, fmt::format("a size depends on the batch in {}, which has no batch",
                                   scope.function.empty() ? "module-level code" : scope.function));
      }
    }
    for (const std::string& function : takes_batch_) {
      if (!Launched(function)) {
        return Fail(0, fmt::format("{} depends on the batch but is not a launched kernel", function));
      }
    }
    return true;
  }

  bool Launched(const std::string& function) const {
    for (size_t k = 0; k + 1 < tokens_[0].size(); ++k) {
      if (Text(0, k) == function && Text(0, k + 1) == "[") {
        return true;
      }
    }
    return false;
  }

  // The argument inserted after the `(` at token k, if any: a kernel's definition, launch or warm-up call.
  std::string Insertion(size_t k) const {
    if (Text(0, k) != "(" || k == 0) {
      return "";
    }
    const std::string before = Text(0, k - 1);
    const std::string names = fmt::format("{}, ", fmt::join(names_, ", "));
    if (k >= 2 && Text(0, k - 2) == "def" && takes_batch_.count(before) != 0) {
      return names;
    }
    if (k >= 3 && before == "warmup" && Text(0, k - 2) == "." && takes_batch_.count(Text(0, k - 3)) != 0) {
      return fmt::format("{}, ", fmt::join(tops_, ", "));
    }
    if (before == "]") {  // NAME[grid](: find the bracket's opening and the name before it
      int depth = 0;
      for (size_t j = k - 1; j > 0; --j) {
        depth += Text(0, j) == "]" ? 1 : Text(0, j) == "[" ? -1 : 0;
        if (depth == 0) {
          return takes_batch_.count(Text(0, j - 1)) != 0 ? names : "";
        }
      }
    }
    return "";
  }

  std::string Write() const {
    const std::string& source = samples_[0].source;
    std::string out;
    size_t at = 0;
    for (size_t k = 0; k < tokens_[0].size(); ++k) {
      const Token& token = tokens_[0][k];
      out += source.substr(at, token.begin - at);
      const auto form = forms_.find(k);
      const bool hint = !token.comment && scopes_[k].function == "egg_precompile";
      out += form == forms_.end() || hint ? Text(0, k) : FormExpression(form->second, names_);
      out += Insertion(k);
      at = token.end;
    }
    return out + source.substr(at);
  }

  const std::vector<BatchSample>& samples_;
  std::vector<int64_t> tops_;       // the range's top of each dynamic size
  std::vector<std::string> names_;  // egg_B, egg_C, ...
  std::vector<std::vector<Token>> tokens_;
  std::map<size_t, SizeForm> forms_;  // token index -> its value in the dynamic sizes
  size_t off_ = 1;                    // FitForm's failure: the first sample off the line
  std::set<std::string> takes_batch_;
  std::vector<Scope> scopes_;  // of samples_[0]'s tokens
  std::string problem_;
  bool form_changed_ = false;
};

}  // namespace

std::string DynamicSizeName(size_t index) {
  return index == 0 ? "egg_B" : fmt::format("egg_{}", static_cast<char>('B' + index));
}

std::vector<std::vector<int64_t>> SamplePoints(const std::vector<int64_t>& tops) {
  std::vector<std::vector<int64_t>> points;
  size_t grid = 1;
  for (size_t i = 0; i < tops.size(); ++i) {
    grid *= 3;
  }
  for (size_t code = 0; code < grid; ++code) {  // the tops + 0, 1 or 2 steps of each size: the fit
    std::vector<int64_t> point = tops;
    for (size_t i = 0, rest = code; i < tops.size(); ++i, rest /= 3) {
      point[i] += static_cast<int64_t>(rest % 3);
    }
    points.push_back(point);
  }
  const auto at = [&](size_t i, int64_t di, size_t j, int64_t dj) {
    std::vector<int64_t> point = tops;
    point[i] += di;
    point[j] += dj;
    return point;
  };
  for (size_t i = 0; i < tops.size(); ++i) {  // the checks: 3 and 1024 steps along each size
    points.push_back(at(i, 3, i, 0));
    points.push_back(at(i, kFarSample, i, 0));
  }
  for (size_t i = 0; i < tops.size(); ++i) {  // and of each pair, 3 and 2 steps, 1024 of each
    for (size_t j = i + 1; j < tops.size(); ++j) {
      points.push_back(at(i, 3, j, 2));
      points.push_back(at(i, kFarSample, j, kFarSample));
    }
  }
  return points;
}

MergedSource MergeBatchSamples(const std::vector<BatchSample>& samples, const std::vector<int64_t>& tops) {
  if (tops.empty() || samples.size() < 3 || samples[1].sizes == samples[0].sizes) {
    return {std::nullopt, "a dynamic batch needs three samples or more"};
  }
  for (const BatchSample& sample : samples) {
    if (sample.sizes.size() != tops.size()) {
      return {std::nullopt, "a sample does not give every dynamic size"};
    }
  }
  return Merger(samples, tops).Merge();
}

}  // namespace egg::expert
