// tessera tokenize -m DIR|FILE|GGUF TEXT        prints the ids, comma-separated
// tessera tokenize -m DIR|FILE --decode IDS prints the text of "1,2,3"
#include <charconv>

#include <fmt/format.h>

#include "command.h"
#include "tessera/core/error.h"
#include "tessera/model/model_dir.h"

namespace {

struct Options {
  std::string model;
  std::string text;
  std::string decode;
  bool no_special = false;
  bool show_tokens = false;
};

// Accepts "1,2,3", "1 2 3" or "[1, 2, 3]" so printed ids paste back as they are.
std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  auto sep = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '[' || c == ']'; };
  while (i < s.size()) {
    if (sep(s[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && !sep(s[j])) ++j;
    int32_t v = 0;
    auto [end, ec] = std::from_chars(s.data() + i, s.data() + j, v);
    if (ec != std::errc() || end != s.data() + j)
      tessera::throw_error<tessera::UsageError>("--decode: '{}' is not a token id", s.substr(i, j - i));
    ids.push_back(v);
    i = j;
  }
  return ids;
}

int run(const Options& o) {
  auto tok = tessera::model::load_tokenizer(o.model);
  if (!o.decode.empty()) {
    auto ids = parse_ids(o.decode);
    fmt::print("{}\n", tok.decode(ids, o.no_special));
    return 0;
  }
  auto ids = tok.encode(o.text, !o.no_special);
  fmt::print("{}\n", fmt::join(ids, ","));
  if (o.show_tokens) {
    std::vector<std::string> toks;
    for (int32_t id : ids) toks.push_back(fmt::format("{:?}", tok.id_to_token(id)));
    fmt::print("{}\n", fmt::join(toks, " "));
  }
  return 0;
}

tessera::cli::Action setup_tokenize(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("tokenize", "Encode text to token ids, or decode ids to text");
  sub->add_option("-m,--model", o->model, "Model directory holding tokenizer.json, the file, or a .gguf")
      ->required();
  sub->add_option("text", o->text, "Text to encode");
  sub->add_option("--decode", o->decode, "Ids to decode, e.g. 1,2,3");
  sub->add_flag("--no-special", o->no_special,
                "Encode without the post-processor's special tokens (e.g. BOS); with --decode, "
                "drop special tokens");
  sub->add_flag("--tokens", o->show_tokens, "Also print the token strings");
  return [o, sub] {
    if (o->decode.empty() && sub->count("text") == 0)
      tessera::throw_error<tessera::UsageError>("tokenize: give TEXT to encode or --decode IDS");
    if (!o->decode.empty() && sub->count("text") > 0)
      tessera::throw_error<tessera::UsageError>("tokenize: give either TEXT or --decode, not both");
    return run(*o);
  };
}
TESSERA_COMMAND("tokenize", setup_tokenize);

}  // namespace
