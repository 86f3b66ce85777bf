//===- gpt-data.cpp - make and inspect llm.c token files ------------------===//
//
//   gpt-data encode --vocab-dir data/gpt2 wiki.train.raw -o data/wiki_train.bin
//   gpt-data encode --vocab-dir data/gpt2 --val-tokens 10M dump/ -o data/wiki/
//   gpt-data decode --vocab-dir data/gpt2 data/austen_val.bin | head
//   gpt-data info data/austen_train.bin
//   gpt-data austen --vocab-dir data/gpt2 --deb r-cran-janeaustenr_1.0.0-1_all.deb -o data
//
// Exit status: 0 on success, 1 when an input is bad, 2 for a usage error.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Austen.h"
#include "runtime/data/Corpus.h"
#include "runtime/data/FileIO.h"
#include "runtime/data/TokenShards.h"
#include "runtime/data/TokenFile.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/data/Unicode.h"
#include "runtime/support/Version.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
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
  encode   text files, JSON lines or folders of them -> a token file or llm.c shards
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
usage: gpt-data encode --vocab-dir DIR [options] INPUT... -o OUT.bin
       gpt-data encode --vocab-dir DIR [options] INPUT... -o DIR/ | -o PREFIX
                       [--shard-tokens N] [--val-tokens N | --val-documents N]

Encodes UTF-8 text with GPT-2's tokenizer into llm.c token files. As in
llm.c, every document is prefixed with <|endoftext|> (50256). The input is
read as a stream (never whole) and encoded on all cores; the output is the
same bytes whatever --threads.

inputs (any mix, in the order given):
  FILE.txt        a text file: one document (WikiText's wiki.*.raw are text)
  FILE.jsonl      JSON lines, one object per line and one document per object,
                  its text in the member --text-field (default "text"): the
                  form of Wikipedia (WikiExtractor --json) and FineWeb dumps.
                  Names ending in .jsonl or .json are read so; --jsonl reads
                  every input so
  DIR             every file under DIR, recursively, in bytewise path order
                  (the same on every host), each by its name as above; names
                  starting with "." and token files (*.bin) are skipped

outputs:
  -o OUT.bin      one token file (at most 2^31-1 tokens)
  -o DIR/         llm.c shards in DIR (created if missing), named after it:
                  DIR/NAME_val_000000.bin (with a validation split), then
                  DIR/NAME_train_000001.bin, ... as llm.c's fineweb.py names
                  them; NAME is DIR's last component
  -o PREFIX       the same shards named PREFIX_val_000000.bin, PREFIX_train_...;
                  shard outputs are chosen by a directory or by any of
                  --shard-tokens, --val-tokens, --val-documents
  Each file is written whole or not at all (a temporary renamed into place).
  An output that is one of the inputs is refused, and so are shards of an
  earlier run under the same prefix; a run that fails removes the shards it
  wrote. Train with --data 'PREFIX_train_*.bin' --val 'PREFIX_val_*.bin'.

options:
  --vocab-dir DIR          folder with encoder.json and vocab.bpe (scripts/setup.sh
                           puts them in data/gpt2)
  -o, --output OUT         the token file, directory or prefix to write
  --shard-tokens N         tokens per shard (default 100M, llm.c's); the last
                           shard of each split holds the rest. N takes K, M, G
                           (10^3, 10^6, 10^9)
  --val-tokens N           a validation split: the first whole documents, up to
                           the first document start at which it holds N tokens
                           (no document is cut between the splits)
  --val-documents N        the same, the first N documents
  --jsonl                  read every input as JSON lines
  --text-field NAME        the member of each JSON object that holds its text
                           (default "text")
  --split-on-blank-lines   text files: a new document at every "\n\n" (llm.c's
                           tinyshakespeare rule: the "\n\n" stays at the end of
                           the previous one)
  --allow-special          "<|endoftext|>" in the text becomes token 50256 instead
                           of being encoded as ordinary text
  --threads N              encoding threads (default: all cores); text is cut
                           into ~1 MiB pieces at line breaks between two
                           characters that are not white space, where GPT-2's
                           tokenizer splits the same way in a piece as in the
                           whole; JSON lines into whole lines
  --progress MODE          auto (default: a bar on a terminal, a line every 10 s
                           otherwise), bar, lines or off; shows bytes read of
                           the total, MB/s and tokens/s, on stderr

examples:
  gpt-data encode --vocab-dir data/gpt2 book.txt -o book.bin
  gpt-data encode --vocab-dir data/gpt2 --split-on-blank-lines wiki.train.raw -o wiki_train.bin
  gpt-data encode --vocab-dir data/gpt2 --val-tokens 10M wiki/ -o data/wiki/
  gpt-data encode --vocab-dir data/gpt2 --jsonl --text-field content dump/ \
      -o data/web/web --shard-tokens 100M --val-documents 1000
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

/// A token count: digits with an optional K, M or G (10^3, 10^6, 10^9).
bool parseCount(const std::string &text, uint64_t &value) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    return false;
  char *end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0)
    return false;
  uint64_t scale = 1;
  std::string suffix = end;
  if (suffix == "K" || suffix == "k")
    scale = 1000;
  else if (suffix == "M")
    scale = 1000000;
  else if (suffix == "G")
    scale = 1000000000;
  else if (!suffix.empty())
    return false;
  if (n > UINT64_MAX / scale)
    return false;
  value = uint64_t(n) * scale;
  return true;
}

std::string humanBytes(double bytes) {
  char buf[32];
  if (bytes >= 1e9)
    std::snprintf(buf, sizeof(buf), "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  else
    std::snprintf(buf, sizeof(buf), "%.0f kB", bytes / 1e3);
  return buf;
}

std::string humanCount(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof(buf), "%.2fG", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof(buf), "%.2fM", n / 1e6);
  else if (n >= 1e3)
    std::snprintf(buf, sizeof(buf), "%.1fK", n / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f", n);
  return buf;
}

/// encode's progress on stderr: a bar redrawn in place on a terminal, or a
/// plain line every 10 s.
class EncodeProgress {
public:
  enum class Mode { Off, Bar, Lines };
  explicit EncodeProgress(Mode mode)
      : mode(mode), start(std::chrono::steady_clock::now()), last(mode == Mode::Lines ? 0 : -1e9) {}

  void update(const CorpusStats &s) {
    double now = secondsSince(start);
    if (mode == Mode::Off || now - last < (mode == Mode::Bar ? 0.1 : 10.0))
      return;
    last = now;
    double mbs = s.bytesDone / 1e6 / std::max(now, 1e-9);
    double tps = s.tokens / std::max(now, 1e-9);
    std::string done = humanBytes(double(s.bytesDone));
    if (s.bytesTotal)
      done += " / " + humanBytes(double(s.bytesTotal));
    char rates[96];
    std::snprintf(rates, sizeof(rates), "%.1f MB/s, %s tokens/s, %s tokens", mbs,
                  humanCount(tps).c_str(), withCommas(s.tokens).c_str());
    if (mode == Mode::Lines) {
      std::string pct;
      if (s.bytesTotal)
        pct = " (" + std::to_string(int(100.0 * s.bytesDone / s.bytesTotal)) + "%)";
      std::fprintf(stderr, "gpt-data: %s%s, %s\n", done.c_str(), pct.c_str(), rates);
      return;
    }
    constexpr int kWidth = 24;
    double frac = s.bytesTotal ? std::min(1.0, double(s.bytesDone) / double(s.bytesTotal)) : 0;
    int filled = int(frac * kWidth);
    std::string bar(size_t(filled), '#');
    bar += std::string(size_t(kWidth - filled), '.');
    std::string eta;
    if (s.bytesTotal && s.bytesDone && frac < 1) {
      int secs = int(now * (1 - frac) / frac);
      char buf[32];
      std::snprintf(buf, sizeof(buf), " | ETA %d:%02d:%02d", secs / 3600, secs / 60 % 60,
                    secs % 60);
      eta = buf;
    }
    std::fprintf(stderr, "\r[%s] %3d%% | %s | %s%s\033[K", bar.c_str(), int(frac * 100),
                 done.c_str(), rates, eta.c_str());
    std::fflush(stderr);
    drawn = true;
  }

  /// A line of its own (a shard written), above the bar.
  void say(const std::string &line) {
    if (mode == Mode::Off)
      return;
    clear();
    std::fprintf(stderr, "%s\n", line.c_str());
  }

  /// Removes the bar before the summary or an error.
  void clear() {
    if (drawn)
      std::fprintf(stderr, "\r\033[K");
    drawn = false;
  }

private:
  Mode mode;
  std::chrono::steady_clock::time_point start;
  double last;
  bool drawn = false;
};

int runEncode(int argc, char **argv) {
  Args args;
  std::string error;
  if (!parseArgs("encode", argc, argv,
                 {"--vocab-dir", "--output", "--threads", "--text-field", "--shard-tokens",
                  "--val-tokens", "--val-documents", "--progress"},
                 {"--split-on-blank-lines", "--allow-special", "--jsonl"}, args, error))
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
  uint64_t counts[3] = {100000000, 0, 0};
  const char *countFlags[3] = {"--shard-tokens", "--val-tokens", "--val-documents"};
  for (int i = 0; i < 3; ++i)
    if (args.values.count(countFlags[i])) {
      const std::string &v = args.values[countFlags[i]];
      if (!parseCount(v, counts[i]) || counts[i] == 0 ||
          (i == 0 && counts[i] > kMaxTokensPerFile))
        return usage(std::string("gpt-data encode: ") + countFlags[i] +
                     " needs a count >= 1 (digits, then K, M or G for 10^3, 10^6, 10^9" +
                     (i == 0 ? ", at most 2147483647" : "") + "), got '" + v + "'");
    }
  if (args.values.count("--val-tokens") && args.values.count("--val-documents"))
    return usage("gpt-data encode: give --val-tokens or --val-documents, not both");
  EncodeProgress::Mode progressMode = isatty(STDERR_FILENO) ? EncodeProgress::Mode::Bar
                                                            : EncodeProgress::Mode::Lines;
  if (args.values.count("--progress")) {
    const std::string &v = args.values["--progress"];
    if (v == "off")
      progressMode = EncodeProgress::Mode::Off;
    else if (v == "bar")
      progressMode = EncodeProgress::Mode::Bar;
    else if (v == "lines")
      progressMode = EncodeProgress::Mode::Lines;
    else if (v != "auto")
      return usage("gpt-data encode: --progress is auto, bar, lines or off, got '" + v + "'");
  }
  if (args.help)
    return printHelp(kEncodeHelp);
  if (args.positional.empty())
    return usage("gpt-data encode: no input files (see gpt-data encode --help)");
  if (!args.values.count("--output"))
    return usage("gpt-data encode: -o OUT.bin is required");
  const std::string out = args.values["--output"];

  // Shards for a directory or a prefix; one file otherwise.
  namespace fs = std::filesystem;
  std::error_code ec;
  bool toDirectory = out.back() == '/' || fs::is_directory(out, ec);
  bool sharded = toDirectory || args.values.count("--shard-tokens") ||
                 args.values.count("--val-tokens") || args.values.count("--val-documents");
  std::string prefix;
  if (toDirectory) {
    std::string dir = out;
    while (dir.size() > 1 && dir.back() == '/')
      dir.pop_back();
    std::string name = fs::path(dir).filename().string();
    if (name.empty() || name == "." || name == "..")
      name = fs::absolute(dir, ec).lexically_normal().filename().string();
    if (name.empty() || name == "." || name == "..")
      name = "data";
    prefix = (dir == "/" ? "" : dir) + "/" + name;
  } else if (sharded) {
    if (out.size() >= 4 && out.compare(out.size() - 4, 4, ".bin") == 0)
      return usage("gpt-data encode: shards (--shard-tokens, --val-tokens, --val-documents) "
                   "go to -o DIR/ or -o PREFIX (PREFIX_train_000001.bin, ...), not to a .bin "
                   "file: " + out);
    prefix = out;
  }
  if (!sharded)
    if (Status s = checkOutputIsNotInput(out, withTokenizerFiles(args, args.positional)); !s)
      return fail("-o " + s.message());
  StatusOr<Tokenizer> tok = loadTokenizer("encode", args);
  if (!tok)
    return fail(tok.status().message());
  StatusOr<std::vector<CorpusFile>> files = resolveCorpus(
      args.positional,
      args.switches.count("--jsonl") ? CorpusFormat::JsonLines : CorpusFormat::Auto);
  if (!files)
    return fail(files.status().message());
  std::vector<std::string> inputs;
  for (const CorpusFile &f : *files)
    inputs.push_back(f.path);
  inputs = withTokenizerFiles(args, inputs);

  std::unique_ptr<TokenSink> sink;
  ShardedTokenWriter *shards = nullptr;
  EncodeProgress progress(progressMode);
  if (!sharded) {
    if (Status s = checkOutputIsNotInput(out, inputs); !s)
      return fail("-o " + s.message());
    sink = std::make_unique<SingleFileSink>(out);
  } else {
    StatusOr<std::vector<std::string>> earlier = existingShards(prefix);
    if (!earlier)
      return fail(earlier.status().message());
    for (const std::string &path : *earlier)
      if (Status s = checkOutputIsNotInput(path, inputs); !s)
        return fail("-o " + s.message());
    if (!earlier->empty())
      return fail("-o " + out + ": shards of an earlier run are there (" + earlier->front() +
                  (earlier->size() > 1 ? ", ... " + std::to_string(earlier->size()) + " files"
                                       : std::string()) +
                  "): remove them or choose another output, so that no stale shard joins "
                  "the dataset");
    std::string dir = dirName(prefix);
    fs::create_directories(dir, ec);
    if (ec)
      return fail(dir + ": cannot create the folder: " + ec.message());
    ShardOptions o;
    o.prefix = prefix;
    o.shardTokens = counts[0];
    o.valTokens = counts[1];
    o.valDocuments = counts[2];
    auto writer = std::make_unique<ShardedTokenWriter>(o);
    writer->onShard([&](const ShardedTokenWriter::Shard &s) {
      progress.say("gpt-data: wrote " + s.path + ": " + withCommas(s.tokens) + " tokens");
    });
    shards = writer.get();
    sink = std::move(writer);
  }

  CorpusOptions options;
  options.splitOnBlankLines = args.switches.count("--split-on-blank-lines");
  options.allowSpecial = args.switches.count("--allow-special");
  if (args.values.count("--text-field"))
    options.textField = args.values["--text-field"];
  options.threads = unsigned(threads);
  auto start = std::chrono::steady_clock::now();
  StatusOr<CorpusStats> stats =
      encodeCorpus(*files, *tok, options, *sink,
                   [&](const CorpusStats &s) { progress.update(s); });
  Status finished = stats ? sink->finish() : stats.status();
  progress.clear();
  if (!finished) {
    sink->discard();
    std::string removed;
    if (shards)
      removed = " (the shards this run wrote are removed)";
    return fail(finished.message() + removed);
  }
  double seconds = secondsSince(start);
  char rate[96];
  std::snprintf(rate, sizeof(rate), "%.2f s on %d thread%s (%.1f MB/s, %s tokens/s)", seconds,
                threads, threads == 1 ? "" : "s", stats->bytesDone / 1e6 / std::max(seconds, 1e-9),
                humanCount(stats->tokens / std::max(seconds, 1e-9)).c_str());
  std::string what = out;
  if (shards) {
    size_t val = 0;
    for (const ShardedTokenWriter::Shard &s : shards->shards())
      val += s.val;
    size_t train = shards->shards().size() - val;
    what = std::to_string(shards->shards().size()) + " shard" +
           (shards->shards().size() == 1 ? "" : "s") + " " + prefix +
           (val ? "_{val,train}_*.bin (" : "_train_*.bin (") +
           (val ? "val " + withCommas(shards->valTokens()) + " tokens in " +
                      std::to_string(val) + ", "
                : std::string()) +
           "train " + withCommas(shards->trainTokens()) + " tokens in " + std::to_string(train) +
           ")";
  }
  std::fprintf(stderr, "gpt-data: wrote %s: %s tokens, %s documents, %s bytes of text, %s\n",
               what.c_str(), withCommas(stats->tokens).c_str(),
               withCommas(stats->documents).c_str(), withCommas(stats->bytesDone).c_str(), rate);
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
