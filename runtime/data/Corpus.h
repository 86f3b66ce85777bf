//===- Corpus.h - text corpora encoded as a stream, on every core ---------===//
//
// gpt-data encode's engine. A corpus is a list of input files, each either
//   - text: one document per file (or, with splitOnBlankLines, one per
//     "\n\n", which stays at the end of the document it closes: llm.c's
//     tinyshakespeare rule), or
//   - JSON lines: one JSON object per line, one document per object, its
//     text in the string member `textField` (Wikipedia and FineWeb dumps
//     come this way); blank lines are skipped.
// Every document is <|endoftext|> followed by the encoding of its text, as
// in llm.c.
//
// The files are read as a stream, never whole: a reader thread cuts them
// into pieces of about `pieceBytes` and worker threads encode the pieces,
// each with a copy of the tokenizer, while the reader reads on and the
// calling thread writes out what is encoded, all three at once with a few
// batches of pieces in flight (a bounded amount of memory). Pieces are
// written out in input order, so the output is the same bytes whatever the
// number of threads. A text piece ends just after a "\n" that has a
// character that is not white space on either side (or at a document's
// end): GPT-2's pre-tokenizer makes that "\n" a piece of its own whether
// the text goes on or ends after it (only a run of white space would end
// differently: "  \n" at the end of a text is one piece, before a letter it
// is "  " and "\n"), and it joins nothing to a following character but a
// space, so the pieces encode to exactly the ids of the whole. A
// JSON-lines piece is whole lines.
//
// Errors name the file and the byte offset (text that is not UTF-8) or the
// line (JSON that is bad, not an object, without the text member, or whose
// member is not a string); the first error in input order is reported,
// whatever the threads.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_CORPUS_H
#define GPTC_RUNTIME_DATA_CORPUS_H

#include "runtime/data/TokenShards.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gptc::data {

enum class CorpusFormat { Auto, Text, JsonLines };

struct CorpusFile {
  std::string path;
  bool jsonLines = false;
  uint64_t bytes = 0; // its size when it is a regular file, else 0
};

/// Whether a file of this name is read as JSON lines in CorpusFormat::Auto:
/// a name ending in .jsonl or .json.
bool looksLikeJsonLines(const std::string &path);

/// The files that `specs` name, in order: a file as it is; a directory as
/// every regular file under it, recursively, sorted by path bytewise
/// (whatever the locale), skipping names that start with "." and token
/// files (*.bin). The format of each comes from `format`, or in Auto from
/// its name. Errors name the spec (missing, empty directory, a device).
StatusOr<std::vector<CorpusFile>> resolveCorpus(const std::vector<std::string> &specs,
                                                CorpusFormat format);

/// Where a piece of text that starts at `from` may end when it should be at
/// least `target` bytes long: just after the first "\n" at or after
/// from + target that comes between two code points that are not white
/// space (\s); npos if there is none in `text`, or if the code point after
/// the first "\n" that could be one is cut short by the end of `text`.
size_t findPieceEnd(std::string_view text, size_t from, size_t target);

struct CorpusOptions {
  bool splitOnBlankLines = false;
  bool allowSpecial = false;        // "<|endoftext|>" in the text is token 50256
  std::string textField = "text";   // JSON lines: the member holding the text
  unsigned threads = 1;             // encoding threads (the reader is one more)
  size_t pieceBytes = size_t(1) << 20;
  size_t readBytes = size_t(4) << 20; // one read(2)
  size_t batchBytes = 0; // text handed to the workers at once; 0: two pieces
                         // per thread, within 4-64 MB
};

struct CorpusStats {
  uint64_t bytesDone = 0;  // input bytes whose tokens were written
  uint64_t bytesTotal = 0; // the regular files' sizes
  uint64_t tokens = 0;
  uint64_t documents = 0;
};

/// Encodes `files` into `sink` in order (write() calls; not finish()),
/// calling `progress` after each batch of pieces. Fails with the first
/// error in input order; what was written before it stays in the sink.
StatusOr<CorpusStats> encodeCorpus(const std::vector<CorpusFile> &files,
                                   const Tokenizer &tokenizer, const CorpusOptions &options,
                                   TokenSink &sink,
                                   const std::function<void(const CorpusStats &)> &progress = {});

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_CORPUS_H
