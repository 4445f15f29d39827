#include "expert/codegen/dynamic_batch.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

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
// one level into `class ModelNew` a method; any other statement at column 0 returns to module level.
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
    } else if (token.first && !token.comment && in_class && word(k) == "def") {
      current = {false, word(k + 1)};
    }
    scopes[k] = current;
  }
  return scopes;
}

struct Linear {
  int64_t q = 0;  // q*B*B + a*B + d: q is not 0 for a size that grows with the square (an attention's scores)
  int64_t a = 0;
  int64_t d = 0;

  int64_t At(int64_t batch) const { return (q * batch + a) * batch + d; }
};

// a*B + d (q*B*B + a*B + d) as Python (and Triton) source over egg_B.
std::string Expression(const Linear& form) {
  std::string text;
  const auto term = [&](int64_t c, const char* power) {
    if (c == 0) {
      return;
    }
    const std::string magnitude = std::llabs(c) == 1 ? power : fmt::format("{} * {}", power, std::llabs(c));
    text +=
        text.empty() ? (c < 0 ? "-" : "") + magnitude : fmt::format(" {} {}", c < 0 ? "-" : "+", magnitude);
  };
  term(form.q, "egg_B * egg_B");
  term(form.a, "egg_B");
  if (form.q == 0 && form.d == 0 && form.a == 1) {
    return text;
  }
  if (form.d != 0) {
    text += fmt::format(" {} {}", form.d < 0 ? "-" : "+", std::llabs(form.d));
  }
  return "(" + text + ")";
}

class Merger {
 public:
  Merger(const std::vector<BatchSample>& samples, int64_t max) : samples_(samples), max_(max) {
    for (const BatchSample& sample : samples) {
      tokens_.push_back(Tokenize(sample.source));
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
            fmt::format("the generated code changes form between batch {} and {} (`{}` at {}, `{}` at {})",
                        samples_[0].batch, samples_[s].batch, LineOf(0, k), samples_[0].batch, LineOf(s, k),
                        samples_[s].batch);
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
        return Fail(k, fmt::format("the generated code changes form with the batch: `{}` at batch {}",
                                   Text(0, k), samples_[0].batch));
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
    std::optional<Linear> form = FitForm(values, false);
    form = form ? form : FitForm(values, true);
    if (!form) {
      // the first sample off the line through the first two
      const int64_t a = (values[1] - values[0]) / (samples_[1].batch - samples_[0].batch);
      size_t s = 2;
      while (s + 1 < samples_.size() &&
             a * (samples_[s].batch - samples_[0].batch) + values[0] == values[s]) {
        ++s;
      }
      return Fail(k, fmt::format("a size is neither linear nor quadratic in the batch ({} at batch {}, {} at "
                                 "batch {})",
                                 values[0], samples_[0].batch, values[s], samples_[s].batch));
    }
    if (form->At(max_) > std::numeric_limits<int32_t>::max()) {
      return Fail(k, fmt::format("a size reaches 2^31 at batch {}", max_));
    }
    linear_[k] = *form;
    return true;
  }

  // The linear (or, `quadratic`, quadratic) form through the first samples' values that every sample's value
  // fits, if there is one with integer coefficients. Samples 0-2 are consecutive batches (BatchSamplePoints),
  // and a quadratic is left at least two samples to check it with.
  std::optional<Linear> FitForm(const std::vector<int64_t>& values, bool quadratic) const {
    const int64_t b0 = samples_[0].batch;
    Linear form;
    if (quadratic) {
      if (samples_.size() < 5 || samples_[1].batch != b0 + 1 || samples_[2].batch != b0 + 2) {
        return std::nullopt;
      }
      const int64_t second = values[2] - 2 * values[1] + values[0];  // 2q
      if (second % 2 != 0) {
        return std::nullopt;
      }
      form.q = second / 2;
      form.a = values[1] - values[0] - form.q * (2 * b0 + 1);
    } else {
      const int64_t step = samples_[1].batch - b0;
      if ((values[1] - values[0]) % step != 0) {
        return std::nullopt;
      }
      form.a = (values[1] - values[0]) / step;
    }
    form.d = values[0] - form.At(b0);
    for (size_t s = 0; s < samples_.size(); ++s) {
      if (form.At(samples_[s].batch) != values[s]) {
        return std::nullopt;
      }
    }
    return form;
  }

  // Every batch-dependent literal is where egg_B is defined: a jit function (which then takes it), the guard
  // or forward; in egg_precompile the largest batch's value stands (a specialization hint); comments say B.
  bool Place() {
    static const std::set<std::string> kPythonScopes = {"_egg_specialized", "forward", "_egg_forward"};
    for (const auto& [k, line] : linear_) {
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
    if (k >= 2 && Text(0, k - 2) == "def" && takes_batch_.count(before) != 0) {
      return "egg_B, ";
    }
    if (k >= 3 && before == "warmup" && Text(0, k - 2) == "." && takes_batch_.count(Text(0, k - 3)) != 0) {
      return std::to_string(max_) + ", ";
    }
    if (before == "]") {  // NAME[grid](: find the bracket's opening and the name before it
      int depth = 0;
      for (size_t j = k - 1; j > 0; --j) {
        depth += Text(0, j) == "]" ? 1 : Text(0, j) == "[" ? -1 : 0;
        if (depth == 0) {
          return takes_batch_.count(Text(0, j - 1)) != 0 ? "egg_B, " : "";
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
      const auto line = linear_.find(k);
      const bool hint = !token.comment && scopes_[k].function == "egg_precompile";
      out += line == linear_.end() || hint ? Text(0, k) : Expression(line->second);
      out += Insertion(k);
      at = token.end;
    }
    return out + source.substr(at);
  }

  const std::vector<BatchSample>& samples_;
  int64_t max_;
  std::vector<std::vector<Token>> tokens_;
  std::map<size_t, Linear> linear_;  // token index -> its value in the batch
  std::set<std::string> takes_batch_;
  std::vector<Scope> scopes_;  // of samples_[0]'s tokens
  std::string problem_;
  bool form_changed_ = false;
};

}  // namespace

std::vector<int64_t> BatchSamplePoints(int64_t max) {
  return {max, max + 1, max + 2, max + 3, max + kFarSample};
}

MergedSource MergeBatchSamples(const std::vector<BatchSample>& samples, int64_t max) {
  if (samples.size() < 3 || samples[1].batch == samples[0].batch) {
    return {std::nullopt, "a dynamic batch needs three samples or more"};
  }
  return Merger(samples, max).Merge();
}

}  // namespace egg::expert
