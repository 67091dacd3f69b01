#pragma once
// One error model (STYLE.md #8): library code throws these; only cli/ catches,
// prints one line and maps the category to an exit code.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace tessera {

// The category decides the CLI exit code, so it is part of the contract.
enum class ErrorCategory {
  usage = 2,      // bad flags / arguments
  input = 3,      // malformed or missing file, unsupported model, bad tensor
  limit = 4,      // a device/design limit is exceeded (L1, BDs, channels, ...)
  gate = 5,       // a numerical gate failed
  internal = 70,  // a broken invariant inside tessera (EX_SOFTWARE)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, const std::string& what)
      : std::runtime_error(what), category_(category) {}
  ErrorCategory category() const noexcept { return category_; }
  int exit_code() const noexcept { return static_cast<int>(category_); }

 private:
  ErrorCategory category_;
};

struct UsageError : Error {
  explicit UsageError(const std::string& w) : Error(ErrorCategory::usage, w) {}
};
// Anything wrong with what the user handed us: files, configs, tensors.
struct InputError : Error {
  explicit InputError(const std::string& w) : Error(ErrorCategory::input, w) {}
};
struct FileError : InputError {  // cannot open / read / map a path
  using InputError::InputError;
};
struct ConfigError : InputError {  // config.json content
  using InputError::InputError;
};
struct UnsupportedError : InputError {  // architecture / feature not supported
  using InputError::InputError;
};
struct SafetensorsError : InputError {  // malformed safetensors header or data
  using InputError::InputError;
};
struct TensorError : InputError {  // missing / unexpected / mis-shaped tensor
  using InputError::InputError;
};
struct TokenizerError : InputError {  // malformed tokenizer.json
  using InputError::InputError;
};
// A hardware or design limit (validator, builders, simulator).
struct LimitError : Error {
  explicit LimitError(const std::string& w) : Error(ErrorCategory::limit, w) {}
};
struct GateError : Error {
  explicit GateError(const std::string& w) : Error(ErrorCategory::gate, w) {}
};
struct InternalError : Error {
  explicit InternalError(const std::string& w) : Error(ErrorCategory::internal, w) {}
};

// Throw E with a fmt-formatted message: throw_error<InputError>("{}: bad", path)
template <class E, class... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> f, Args&&... args) {
  throw E(fmt::format(f, std::forward<Args>(args)...));
}

// Invariant check for tessera's own logic (not user input).
#define TESSERA_CHECK(cond, ...)                                              \
  do {                                                                        \
    if (!(cond))                                                              \
      ::tessera::throw_error<::tessera::InternalError>(                       \
          "internal check failed at {}:{}: {} ({})", __FILE__, __LINE__,     \
          #cond, ::fmt::format(__VA_ARGS__));                                 \
  } while (0)

}  // namespace tessera
