//===- gpt-data.cpp - make and inspect llm.c token files ------------------===//
//
//   gpt-data encode --vocab-dir data/gpt2 wiki.train.raw -o data/wiki_train.bin
//   gpt-data decode --vocab-dir data/gpt2 data/austen_val.bin | head
//   gpt-data info data/austen_train.bin
//   gpt-data austen --vocab-dir data/gpt2 --deb r-cran-janeaustenr_1.0.0-1_all.deb -o data
//
// Exit status: 0 on success, 1 when an input is bad, 2 for a usage error.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Austen.h"
#include "runtime/data/FileIO.h"
#include "runtime/data/TokenFile.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/data/Unicode.h"
#include "runtime/support/Version.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace gptc;
using namespace gptc::data;

namespace {

const char *const kUsage = R"(
gpt-data: make and inspect llm.c token files (GPT-2 BPE, uint16 tokens)

usage: gpt-data <command> [options]

commands:
  encode   text files -> one token file
  decode   token file -> text on stdout
  info     summary of a token file
  austen   Jane Austen's six novels (Debian r-cran-janeaustenr) -> train/val files

options:
  -h, --help   this text ('gpt-data <command> --help': the command's options)
  --version    the version

examples:
  gpt-data encode --vocab-dir data/gpt2 book.txt -o book.bin
  gpt-data info --vocab-dir data/gpt2 data/austen_train.bin
  gpt-data decode --vocab-dir data/gpt2 data/austen_val.bin | head

Run 'gpt-data <command> --help' for a command's options and examples.
)";

const char *const kEncodeHelp = R"(
usage: gpt-data encode --vocab-dir DIR [--split-on-blank-lines]
                       [--allow-special] [--threads N] IN.txt... -o OUT.bin

Encodes UTF-8 text with GPT-2's tokenizer into an llm.c token file. As in
llm.c, every document is prefixed with <|endoftext|> (50256). Each input file
is one document; WikiText's raw files (wiki.*.raw) are plain text and are
read the same way.

  --vocab-dir DIR          folder with encoder.json and vocab.bpe (scripts/setup.sh
                           puts them in data/gpt2)
  -o, --output OUT.bin     the token file to write
  --split-on-blank-lines   a new document at every "\n\n" (llm.c's tinyshakespeare
                           rule: the "\n\n" stays at the end of the previous one)
  --allow-special          "<|endoftext|>" in the text becomes token 50256 instead
                           of being encoded as ordinary text
  --threads N              encode on N threads (default: all cores); the text is
                           cut into ~1 MiB pieces at line starts, where GPT-2's
                           tokenizer never joins across, so the output is the
                           same whatever N

examples:
  gpt-data encode --vocab-dir data/gpt2 book.txt -o book.bin
  gpt-data encode --vocab-dir data/gpt2 --split-on-blank-lines wiki.train.raw -o wiki_train.bin
)";

const char *const kDecodeHelp = R"(
usage: gpt-data decode --vocab-dir DIR IN.bin [-o OUT.txt]

Writes the text of a token file (to stdout unless -o). Document separators
appear as <|endoftext|>.

examples:
  gpt-data decode --vocab-dir data/gpt2 data/austen_val.bin | head -20
  gpt-data decode --vocab-dir data/gpt2 data/austen_val.bin -o persuasion.txt
)";

const char *const kInfoHelp = R"(
usage: gpt-data info [--vocab-dir DIR] [-n N] FILE.bin

Checks a token file and prints its token count, document count (tokens
50256), largest id and first N tokens (default 16). With --vocab-dir the ids
are checked against the vocabulary and the first tokens are shown as text.

examples:
  gpt-data info data/austen_train.bin
  gpt-data info --vocab-dir data/gpt2 -n 32 data/austen_val.bin
)";

const char *const kAustenHelp = R"(
usage: gpt-data austen --vocab-dir DIR (--deb FILE.deb | --rdb Rdata.rdb)
                       -o OUTDIR

Extracts the six novels of Debian's r-cran-janeaustenr (without installing R:
'apt-get download r-cran-janeaustenr'), ends each line of a novel with "\n",
and writes
  OUTDIR/austen_train.bin  Emma, Mansfield Park, Northanger Abbey, Pride and
                           Prejudice, Sense and Sensibility (878,254 tokens)
  OUTDIR/austen_val.bin    Persuasion (115,080 tokens)
each novel prefixed with <|endoftext|>.

  --deb FILE.deb   the package; unpacked with 'dpkg-deb -x' into a temporary
                   folder, which is removed afterwards
  --rdb FILE       or the package's Rdata.rdb, found at
                   usr/lib/R/site-library/janeaustenr/data/Rdata.rdb

examples:
  apt-get download r-cran-janeaustenr
  gpt-data austen --vocab-dir data/gpt2 --deb r-cran-janeaustenr_1.0.0-1_all.deb -o data
  dpkg-deb -x r-cran-janeaustenr_1.0.0-1_all.deb /tmp/x
  gpt-data austen --vocab-dir data/gpt2 -o data \
      --rdb /tmp/x/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb
)";

//===----------------------------------------------------------------------===//
// Command lines
//===----------------------------------------------------------------------===//

/// Flags and positional arguments of one subcommand.
struct Args {
  std::map<std::string, std::string> values; // "--flag" -> value
  std::map<std::string, bool> switches;      // "--flag" -> present
  std::vector<std::string> positional;
  bool help = false;
};

/// Parses argv for `command`; `valueFlags` take a value ("--f V" or
/// "--f=V"), `switchFlags` take none. "-o" is short for "--output".
bool parseArgs(const std::string &command, int argc, char **argv,
               const std::vector<std::string> &valueFlags,
               const std::vector<std::string> &switchFlags, Args &args, std::string &error) {
  auto known = [](const std::vector<std::string> &list, const std::string &f) {
    for (const std::string &x : list)
      if (x == f)
        return true;
    return false;
  };
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      args.help = true;
      continue;
    }
    if (arg == "-o")
      arg = "--output";
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      args.positional.push_back(arg);
      continue;
    }
    std::string name = arg, value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    if (known(switchFlags, name) && !inlineValue) {
      args.switches[name] = true;
    } else if (known(valueFlags, name)) {
      if (!inlineValue) {
        if (i + 1 >= argc) {
          error = "gpt-data " + command + ": " + name + " needs a value";
          return false;
        }
        value = argv[++i];
      }
      if (value.empty()) {
        error = "gpt-data " + command + ": " + name + " needs a non-empty value";
        return false;
      }
      args.values[name] = value;
    } else {
      error = "gpt-data " + command + ": unknown option " + arg + " (see gpt-data " +
              command + " --help)";
      return false;
    }
  }
  return true;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string withCommas(uint64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0)
      out += ',';
    out += s[i];
  }
  return out;
}

int printHelp(const char *text) {
  std::fputs(text + (*text == '\n'), stdout); // the raw strings open with a newline
  return 0;
}

/// Errors name the tool, as gptc's and gptrun's do, unless the message
/// already starts with the command ("gpt-data encode: ...").
std::string named(const std::string &message, const char *kind) {
  return message.rfind("gpt-data", 0) == 0 ? message : std::string("gpt-data: ") + kind + message;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "%s\n", named(message, "error: ").c_str());
  return 1;
}

int usage(const std::string &message) {
  std::fprintf(stderr, "%s\n", named(message, "").c_str());
  return 2;
}

StatusOr<Tokenizer> loadTokenizer(const std::string &command, const Args &args) {
  auto it = args.values.find("--vocab-dir");
  if (it == args.values.end())
    return Status::error("gpt-data " + command +
                         ": --vocab-dir DIR is required (the folder with encoder.json and "
                         "vocab.bpe; scripts/setup.sh puts them in data/gpt2)");
  return Tokenizer::load(it->second);
}

/// `inputs` plus the tokenizer's files, which an output must not be either
/// (checkOutputIsNotInput: `-o data/gpt2/vocab.bpe` would destroy it).
std::vector<std::string> withTokenizerFiles(const Args &args, std::vector<std::string> inputs) {
  if (auto it = args.values.find("--vocab-dir"); it != args.values.end()) {
    inputs.push_back(it->second + "/encoder.json");
    inputs.push_back(it->second + "/vocab.bpe");
  }
  return inputs;
}

//===----------------------------------------------------------------------===//
// Commands
//===----------------------------------------------------------------------===//

/// Bytes of text per piece that a thread encodes.
constexpr size_t kEncodePieceBytes = size_t(1) << 20;

/// Cuts `text` into pieces of about `target` bytes that encode to the same
/// ids apart as together: each cut is just after a "\n" that a printable
/// ASCII byte (not whitespace) follows. GPT-2's pre-tokenizer only joins a
/// literal space to the run after it, and it ends a whitespace run before
/// the last whitespace ahead of a non-space, so no piece of its crosses
/// such a cut; BPE merges within a piece; "<|endoftext|>" holds no "\n".
std::vector<std::string_view> cutAtLineStarts(std::string_view text, size_t target) {
  std::vector<std::string_view> pieces;
  while (text.size() > target) {
    size_t cut = std::string_view::npos;
    for (size_t at = text.find('\n', target); at != std::string_view::npos && at + 1 < text.size();
         at = text.find('\n', at + 1)) {
      unsigned char next = static_cast<unsigned char>(text[at + 1]);
      if (next > 0x20 && next < 0x7F) {
        cut = at + 1;
        break;
      }
    }
    if (cut == std::string_view::npos)
      break;
    pieces.push_back(text.substr(0, cut));
    text.remove_prefix(cut);
  }
  pieces.push_back(text);
  return pieces;
}

int runEncode(int argc, char **argv) {
  Args args;
  std::string error;
  if (!parseArgs("encode", argc, argv, {"--vocab-dir", "--output", "--threads"},
                 {"--split-on-blank-lines", "--allow-special"}, args, error))
    return usage(error);
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  if (args.values.count("--threads")) {
    const std::string &v = args.values["--threads"];
    char *end = nullptr;
    long n = std::strtol(v.c_str(), &end, 10);
    if (*end != '\0' || n < 1 || n > 1024)
      return usage("gpt-data encode: --threads needs a whole number in 1..1024, got '" + v +
                   "'");
    threads = int(n);
  }
  if (args.help)
    return printHelp(kEncodeHelp);
  if (args.positional.empty())
    return usage("gpt-data encode: no input files (see gpt-data encode --help)");
  if (!args.values.count("--output"))
    return usage("gpt-data encode: -o OUT.bin is required");
  if (Status s = checkOutputIsNotInput(args.values["--output"],
                                       withTokenizerFiles(args, args.positional));
      !s)
    return fail("-o " + s.message());
  StatusOr<Tokenizer> tok = loadTokenizer("encode", args);
  if (!tok)
    return fail(tok.status().message());
  bool split = args.switches.count("--split-on-blank-lines");
  bool allowSpecial = args.switches.count("--allow-special");

  auto start = std::chrono::steady_clock::now();
  // The work in output order: each document is <|endoftext|> (an empty
  // piece that starts a document) and then its text, cut into pieces.
  struct Piece {
    bool startsDocument;
    std::string_view text;
  };
  std::vector<std::string> texts;
  std::vector<Piece> pieces;
  size_t documents = 0, bytes = 0;
  for (const std::string &path : args.positional) {
    StatusOr<std::string> text = readFile(path);
    if (!text)
      return fail(text.status().message());
    if (size_t bad = findInvalidUtf8(*text); bad != text->size())
      return fail(path + ": not UTF-8 text (invalid byte at offset " + std::to_string(bad) +
                  ")");
    bytes += text->size();
    texts.push_back(std::move(*text));
  }
  for (const std::string &text : texts) {
    std::string_view rest = text;
    while (true) {
      // With --split-on-blank-lines a document runs through its "\n\n".
      size_t cut = split ? rest.find("\n\n") : std::string_view::npos;
      std::string_view doc = rest.substr(0, cut == std::string_view::npos ? cut : cut + 2);
      pieces.push_back({true, {}});
      for (std::string_view piece : cutAtLineStarts(doc, kEncodePieceBytes))
        pieces.push_back({false, piece});
      ++documents;
      if (cut == std::string_view::npos)
        break;
      rest = rest.substr(cut + 2);
    }
  }
  // Each thread takes the next piece and encodes it with its own copy of the
  // tokenizer (encode memoises); the pieces are joined in order.
  std::vector<std::vector<int32_t>> encoded(pieces.size());
  std::atomic<size_t> nextPiece{0};
  auto work = [&](Tokenizer local) {
    for (size_t i; (i = nextPiece.fetch_add(1)) < pieces.size();) {
      if (pieces[i].startsDocument)
        encoded[i].push_back(local.endOfText());
      else
        local.encode(pieces[i].text, encoded[i], allowSpecial);
    }
  };
  threads = int(std::min<size_t>(size_t(threads), std::max<size_t>(1, pieces.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back(work, *tok);
  work(std::move(*tok));
  for (std::thread &t : pool)
    t.join();
  std::vector<int32_t> ids;
  size_t total = 0;
  for (const std::vector<int32_t> &e : encoded)
    total += e.size();
  ids.reserve(total);
  for (std::vector<int32_t> &e : encoded) {
    ids.insert(ids.end(), e.begin(), e.end());
    std::vector<int32_t>().swap(e);
  }
  const std::string &out = args.values["--output"];
  if (Status s = writeTokenFile(out, ids); !s)
    return fail(s.message());
  std::fprintf(stderr,
               "gpt-data: wrote %s: %s tokens, %s documents, %s bytes of text, %.2f s on %d "
               "thread%s\n",
               out.c_str(), withCommas(ids.size()).c_str(), withCommas(documents).c_str(),
               withCommas(bytes).c_str(), secondsSince(start), threads,
               threads == 1 ? "" : "s");
  return 0;
}

int runDecode(int argc, char **argv) {
  Args args;
  std::string error;
  if (!parseArgs("decode", argc, argv, {"--vocab-dir", "--output"}, {}, args, error))
    return usage(error);
  if (args.help)
    return printHelp(kDecodeHelp);
  if (args.positional.size() != 1)
    return usage("gpt-data decode: expected one token file (see gpt-data decode --help)");
  if (args.values.count("--output"))
    if (Status s = checkOutputIsNotInput(args.values["--output"],
                                         withTokenizerFiles(args, args.positional));
        !s)
      return fail("-o " + s.message());
  StatusOr<Tokenizer> tok = loadTokenizer("decode", args);
  if (!tok)
    return fail(tok.status().message());
  StatusOr<std::vector<uint16_t>> tokens =
      readTokenFile(args.positional[0], tok->vocabSize());
  if (!tokens)
    return fail(tokens.status().message());
  StatusOr<std::string> text = tok->decode(std::vector<int32_t>(tokens->begin(), tokens->end()));
  if (!text)
    return fail(args.positional[0] + ": " + text.status().message());
  if (args.values.count("--output")) {
    if (Status s = writeFile(args.values["--output"], *text); !s)
      return fail(s.message());
    return 0;
  }
  if (std::fwrite(text->data(), 1, text->size(), stdout) != text->size() ||
      std::fflush(stdout) != 0)
    return fail("gpt-data decode: cannot write to stdout");
  return 0;
}

int runInfo(int argc, char **argv) {
  Args args;
  std::string error;
  if (!parseArgs("info", argc, argv, {"--vocab-dir", "-n"}, {}, args, error))
    return usage(error);
  if (args.help)
    return printHelp(kInfoHelp);
  if (args.positional.size() != 1)
    return usage("gpt-data info: expected one token file (see gpt-data info --help)");
  long first = 16;
  if (args.values.count("-n")) {
    char *end = nullptr;
    first = std::strtol(args.values["-n"].c_str(), &end, 10);
    if (*end != '\0' || first < 0)
      return usage("gpt-data info: -n wants a count >= 0, got '" + args.values["-n"] + "'");
  }
  std::optional<StatusOr<Tokenizer>> tok;
  if (args.values.count("--vocab-dir")) {
    tok = Tokenizer::load(args.values["--vocab-dir"]);
    if (!*tok)
      return fail(tok->status().message());
  }
  const std::string &path = args.positional[0];
  StatusOr<std::vector<uint16_t>> tokens = readTokenFile(path, tok ? (**tok).vocabSize() : 0);
  if (!tokens)
    return fail(tokens.status().message());
  size_t documents = 0;
  uint16_t maxId = 0;
  for (uint16_t t : *tokens) {
    documents += t == 50256;
    maxId = std::max(maxId, t);
  }
  std::printf("file:      %s\n", path.c_str());
  std::printf("tokens:    %s\n", withCommas(tokens->size()).c_str());
  std::printf("documents: %s (tokens 50256)\n", withCommas(documents).c_str());
  std::printf("max id:    %u\n", maxId);
  size_t n = std::min<size_t>(first, tokens->size());
  std::printf("first %zu:", n);
  for (size_t i = 0; i < n; ++i)
    std::printf(" %u", (*tokens)[i]);
  std::printf("\n");
  if (tok) {
    StatusOr<std::string> text =
        (**tok).decode(std::vector<int32_t>(tokens->begin(), tokens->begin() + n));
    std::string shown;
    for (char c : *text)
      shown += c == '\n' ? std::string("\\n") : std::string(1, c);
    std::printf("as text:   \"%s\"\n", shown.c_str());
  }
  return 0;
}

/// Runs argv[0] with argv; the exit status, or -1 if it could not start.
int runProcess(const std::vector<std::string> &argv) {
  std::vector<char *> cargv;
  for (const std::string &a : argv)
    cargv.push_back(const_cast<char *>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    execvp(cargv[0], cargv.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The Rdata.rdb inside a .deb, through 'dpkg-deb -x' into a temporary folder.
StatusOr<std::string> readRdbFromDeb(const std::string &deb) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(deb, ec))
    return Status::error(deb + ": no such file");
  std::string tmpl = (fs::temp_directory_path(ec) / "gpt-data-deb-XXXXXX").string();
  if (!mkdtemp(tmpl.data()))
    return Status::error("gpt-data austen: cannot create a temporary folder: " +
                         std::string(std::strerror(errno)));
  int rc = runProcess({"dpkg-deb", "-x", deb, tmpl});
  StatusOr<std::string> contents = Status::error("");
  if (rc != 0) {
    contents = Status::error(deb + ": 'dpkg-deb -x' failed (" +
                             (rc == 127 ? std::string("dpkg-deb not found")
                                        : "exit status " + std::to_string(rc)) +
                             "); is this the r-cran-janeaustenr package?");
  } else {
    std::string rdb = tmpl + "/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb";
    if (!fs::is_regular_file(rdb, ec))
      contents = Status::error(deb + ": no usr/lib/R/site-library/janeaustenr/data/Rdata.rdb "
                                     "in the package; is it r-cran-janeaustenr?");
    else
      contents = readFile(rdb);
  }
  fs::remove_all(tmpl, ec);
  return contents;
}

int runAusten(int argc, char **argv) {
  Args args;
  std::string error;
  if (!parseArgs("austen", argc, argv, {"--vocab-dir", "--deb", "--rdb", "--output"}, {}, args,
                 error))
    return usage(error);
  if (args.help)
    return printHelp(kAustenHelp);
  if (!args.positional.empty())
    return usage("gpt-data austen: unexpected argument '" + args.positional[0] +
                 "' (see gpt-data austen --help)");
  if (args.values.count("--deb") == args.values.count("--rdb"))
    return usage("gpt-data austen: give exactly one of --deb FILE.deb and --rdb Rdata.rdb");
  if (!args.values.count("--output"))
    return usage("gpt-data austen: -o OUTDIR is required");
  {
    std::string source = args.values.count("--deb") ? args.values["--deb"] : args.values["--rdb"];
    std::vector<std::string> inputs = withTokenizerFiles(args, {source});
    for (const char *name : {"austen_train.bin", "austen_val.bin"})
      if (Status s = checkOutputIsNotInput(args.values["--output"] + "/" + name, inputs); !s)
        return fail("-o " + s.message());
  }
  StatusOr<Tokenizer> tok = loadTokenizer("austen", args);
  if (!tok)
    return fail(tok.status().message());

  auto start = std::chrono::steady_clock::now();
  std::string source;
  StatusOr<std::vector<Novel>> novels = Status::error("");
  if (args.values.count("--deb")) {
    source = args.values["--deb"];
    StatusOr<std::string> rdb = readRdbFromDeb(source);
    if (!rdb)
      return fail(rdb.status().message());
    novels = parseAustenNovels(*rdb);
    if (!novels)
      return fail(source + ": Rdata.rdb: " + novels.status().message());
  } else {
    source = args.values["--rdb"];
    novels = readAustenNovels(source);
    if (!novels)
      return fail(novels.status().message());
  }

  std::vector<int32_t> train, val;
  std::printf("%-22s %7s %9s %9s  %s\n", "novel", "lines", "bytes", "tokens", "split");
  for (const Novel &novel : *novels) {
    bool isVal = novel.title == "Persuasion";
    std::vector<int32_t> &ids = isVal ? val : train;
    size_t before = ids.size();
    tok->encodeDocument(novel.text, ids);
    std::printf("%-22s %7s %9s %9s  %s\n", novel.title.c_str(),
                withCommas(novel.lines).c_str(), withCommas(novel.text.size()).c_str(),
                withCommas(ids.size() - before).c_str(), isVal ? "val" : "train");
  }
  std::filesystem::path dir = args.values["--output"];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return fail(dir.string() + ": cannot create the folder: " + ec.message());
  const std::pair<const char *, const std::vector<int32_t> *> outputs[] = {
      {"austen_train.bin", &train}, {"austen_val.bin", &val}};
  for (auto [name, ids] : outputs) {
    std::string path = (dir / name).string();
    if (Status s = writeTokenFile(path, *ids); !s)
      return fail(s.message());
    std::printf("wrote %s: %s tokens\n", path.c_str(), withCommas(ids->size()).c_str());
  }
  std::printf("%.2f s\n", secondsSince(start));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usage(kUsage + 1); // without the raw string's first newline
  std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help")
    return printHelp(kUsage);
  if (command == "--version") {
    std::printf("gpt-data %s\n", gptc::versionString());
    return 0;
  }
  int rest = argc - 2;
  char **restv = argv + 2;
  if (command == "encode")
    return runEncode(rest, restv);
  if (command == "decode")
    return runDecode(rest, restv);
  if (command == "info")
    return runInfo(rest, restv);
  if (command == "austen")
    return runAusten(rest, restv);
  return usage("gpt-data: unknown command '" + command + "' (encode, decode, info, austen)");
}
