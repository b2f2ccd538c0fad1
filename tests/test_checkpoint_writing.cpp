// Writing checkpoints a chunk at a time (write_safetensors, save_checkpoint, write_hf_gpt2): the
// files must be byte for byte what the writer that built the whole file in memory wrote. The
// SHA-256 digests below were taken from that writer (commit fe70e46) on the same deterministic
// tensors; each case has tensors larger than one 4 MiB chunk, so chunk boundaries fall inside
// them. The loading side reads the file once: its data checksum is checked on the pass that
// writes the values into the model, and damage found there must stop the load.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/sha256.h"
#include "io/checkpoint.h"
#include "io/hf_gpt2.h"
#include "io/run_directory.h"
#include "io/safetensors.h"
#include "io/training_state.h"
#include "model/gpt.h"
#include "safetensors_bytes.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;
using testing::read_all;
using testing::TempDir;

// Deterministic values in [-8, 8), multiples of 2^-20 (exact in fp32): both signs, many
// magnitudes, a few exact zeros. The same on every machine and compiler.
float value_at(size_t i) {
  const uint32_t hash = static_cast<uint32_t>(i) * 2654435761u;
  return static_cast<float>(static_cast<int32_t>(hash >> 8) - (1 << 23)) * 0x1p-20f;
}

std::vector<float> values(size_t count, size_t seed) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = value_at(i + seed);
  return out;
}

// GPT-2's structure, small but for one wide layer: its MLP matrices (2304 x 576, 1.3M values)
// span the writer's chunks of 1M values.
Config wide_gpt2_config(bool tied_with_biases) {
  Config config;
  config.n_layer = 1, config.n_head = 2, config.n_embd = 576, config.block_size = 8;
  config.head_size = 0, config.block_order = "pre_norm", config.vocab_padding = 64;
  config.bias = config.qkv_bias = config.tie_weights = tied_with_biases;
  config.lm_head_bias = false;
  return config;
}

const Vocabulary& vocabulary() {
  static const Vocabulary characters = Vocabulary::from_text(U"abcdefghijklmnopqrst");
  return characters;
}

// Every parameter deterministic except the vocabulary padding rows, which stay zero as in a model.
std::vector<float> parameters_of(const ModelShape& shape) {
  const ParameterLayout layout(shape);
  std::vector<float> flat = values(layout.total(), 11);
  for (const ParameterTensor& tensor : layout.tensors())
    std::fill(flat.begin() + tensor.offset + tensor.saved_size(),
              flat.begin() + tensor.offset + tensor.size, 0.0f);
  return flat;
}

TEST(CheckpointWriting, WriteSafetensorsGivesTheWholeFileWritersBytes) {
  TempDir dir;
  const std::vector<float> big = values(1200 * 1100, 0), small = values(7, 5);
  write_safetensors(dir.file("x.safetensors"),
                    {{"big", {1200, 1100}, big.data()},
                     {"small", {7}, small.data()},
                     {"empty", {0, 3}, small.data()}},
                    {{"format", "pt"}, {"note", "streamed"}});
  const std::string expected = "46638fea2aacb247dd966b19ae27d7be6ac28241061ed9fbfb4c9dfecf7933fc";
  EXPECT_EQ(sha256_hex(read_all(dir.file("x.safetensors"))), expected);
  // The same values made as they are written, a chunk at a time, give the same file.
  std::vector<std::pair<size_t, size_t>> asked;
  write_safetensors(dir.file("made.safetensors"),
                    {{"big",
                      {1200, 1100},
                      [&](size_t first, size_t count, float* out) {
                        asked.emplace_back(first, count);
                        std::copy(big.begin() + first, big.begin() + first + count, out);
                      }},
                     {"small", {7}, small.data()},
                     {"empty", {0, 3}, small.data()}},
                    {{"format", "pt"}, {"note", "streamed"}});
  EXPECT_EQ(sha256_hex(read_all(dir.file("made.safetensors"))), expected);
  const size_t chunk = SafetensorsFile::kChunkBytes / sizeof(float);
  EXPECT_EQ(asked,
            (std::vector<std::pair<size_t, size_t>>{{0, chunk}, {chunk, big.size() - chunk}}));
}

// A tensor whose values cannot be made (here: an exception after the first chunk went to the
// disk) leaves the previous file as it was and no temporary file beside it.
TEST(CheckpointWriting, AFailureInTheMiddleKeepsThePreviousFile) {
  TempDir dir;
  const std::vector<float> old_values = values(10, 0), new_values = values(1200 * 1100, 3);
  write_safetensors(dir.file("x.safetensors"), {{"w", {10}, old_values.data()}}, {});
  const std::string old_bytes = read_all(dir.file("x.safetensors"));
  const std::string message = error_message([&] {
    write_safetensors(dir.file("x.safetensors"),
                      {{"w",
                        {1200, 1100},
                        [&](size_t first, size_t count, float* out) {
                          if (first > 0) throw Error("the values ran out");
                          std::copy_n(new_values.begin(), count, out);
                        }}},
                      {});
  });
  EXPECT_EQ(message, "the values ran out");
  EXPECT_TRUE(read_all(dir.file("x.safetensors")) == old_bytes);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("")))
    names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"x.safetensors"});
}

TEST(CheckpointWriting, SaveCheckpointWritesTheWholeFileWritersData) {
  TempDir dir;
  const Config config = wide_gpt2_config(true);
  const ModelShape shape = ModelShape::from_config(config, vocabulary().size());
  save_checkpoint(dir.file("ckpt.safetensors"), shape, parameters_of(shape), config, vocabulary(),
                  5, 1.5, 1.75);
  // The metadata holds the config, whose keys other work adds to: the data section is pinned
  // (every tensor's name, place and value, through the writer above), the metadata checked.
  const SafetensorsFile file = SafetensorsFile::read(dir.file("ckpt.safetensors"));
  EXPECT_EQ(file.metadata().at("data_sha256"),
            "42faef717eeaaed83bf520497d469b1346ef8affb7b3dfc89a6aee4f32b3be90");
  EXPECT_EQ(file.data_sha256(), file.metadata().at("data_sha256"));
  EXPECT_EQ(file.metadata().at("step"), "5");
}

TEST(CheckpointWriting, ExportWritesTheWholeFileWritersBytes) {
  for (const bool tied_with_biases : {true, false}) {
    SCOPED_TRACE(tied_with_biases ? "tied, biases" : "untied, no biases (zeros written)");
    TempDir dir;
    const Config config = wide_gpt2_config(tied_with_biases);
    const ModelShape shape = ModelShape::from_config(config, vocabulary().size());
    write_hf_gpt2(dir.file("hf"), config, shape, parameters_of(shape), vocabulary());
    EXPECT_EQ(sha256_hex(read_all(dir.file("hf/model.safetensors"))),
              tied_with_biases
                  ? "500884014007f38f668aad48bcbc0c87193ef3e822bbdb12db748483bdf68a24"
                  : "6ad8e249b101b6e5b9aac449c5a910187458f6105f963ff3ae1fea4c68cbe795");
  }
}

// On --resume the metrics log keeps what the resumed run would have written: evaluations before
// its step, training records up to it. A line a kill cut short goes, and so does a record whose
// step is not a whole number (an edited file: casting 2.5 or 1e300 to an integer was undefined).
TEST(RunDirectoryMetrics, ResumeKeepsTheRecordsBeforeItsStepAndDropsTheRest) {
  TempDir dir;
  const RunDirectory run(dir.file(""));
  dir.write("metrics.jsonl",
            "{\"type\": \"eval\", \"step\": 0}\n"
            "{\"type\": \"train\", \"step\": 5}\n"
            "{\"type\": \"eval\", \"step\": 5}\n"
            "{\"type\": \"train\", \"step\": 6}\n"
            "{\"type\": \"train\", \"step\": 2.5}\n"
            "{\"type\": \"train\", \"step\": 1e300}\n"
            "{\"type\": \"train\", \"st");
  run.truncate_metrics(5);
  std::ifstream kept(run.metrics_path());
  const std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "{\"type\": \"eval\", \"step\": 0}\n{\"type\": \"train\", \"step\": 5}\n");
}

// Another writer's temporary file, under the name this process would once have taken (two
// containers' processes, each pid 1, or two hosts writing one shared folder): a write must not
// take it over (it was opened with O_TRUNC, written and renamed away under the other writer).
TEST(AtomicWrites, NeverWriteIntoAnotherWritersTemporaryFile) {
  TempDir dir;
  const std::string others = dir.write(".target.tmp." + std::to_string(::getpid()), "theirs");
  write_file_atomically(dir.file("target"), "mine");
  EXPECT_EQ(read_all(dir.file("target")), "mine");
  ASSERT_TRUE(std::filesystem::exists(others));
  EXPECT_EQ(read_all(others), "theirs");
  const auto entries = std::filesystem::directory_iterator(dir.file(""));
  EXPECT_EQ(std::distance(begin(entries), end(entries)), 2) << "a temporary file stayed behind";
}

// A file written into a folder that is not there (`folio import --out nodir/x.safetensors`):
// the error names the folder, not "No such file or directory", and speaks of no previous
// contents that never were.
TEST(AtomicWrites, AMissingFolderIsNamed) {
  TempDir dir;
  const std::string message =
      error_message([&] { write_file_atomically(dir.file("nodir/x.safetensors"), "mine"); });
  EXPECT_NE(message.find("the folder " + dir.file("nodir") + " does not exist"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("previous contents"), std::string::npos) << message;
}

// Ctrl-C in the middle of a write, in a command whose signals end it (`folio export` of a large
// model): the process ends by the signal as before, and its temporary file is gone (it had stayed
// in the folder, hidden, for good).
TEST(AtomicWrites, ASignalMidWriteLeavesNoTemporaryFile) {
  TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) {
    write_file_atomically(dir.file("export"), [](AtomicFileWriter& out) {
      out.write("half of it", 10);
      ::raise(SIGINT);
      out.write("the rest", 8);
    });
    ::_exit(0);  // the signal did not end it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "status " << status;
  const auto entries = std::filesystem::directory_iterator(dir.file(""));
  EXPECT_EQ(std::distance(begin(entries), end(entries)), 0) << "the temporary file stayed";
}

// A folder with an earlier run: a new run refuses it, a resumed one keeps its files, and
// --overwrite removes its state at the start (before, a kill before the new run's first save
// left it for --resume to continue the old run) but keeps its checkpoint, the good model that the
// new run's first evaluation replaces (cli_training_failures: a run that fails first keeps it).
TEST(RunDirectoryStart, OverwriteRemovesTheEarlierRunsStateAndKeepsItsCheckpoint) {
  TempDir dir;
  RunDirectory run(dir.file("run"));
  run.prepare(RunDirectory::Start::kNew);
  dir.write("run/ckpt.safetensors", "earlier checkpoint");
  dir.write("run/state.safetensors", "earlier state");
  EXPECT_THROW(run.prepare(RunDirectory::Start::kNew), Error);
  run.prepare(RunDirectory::Start::kResume);
  EXPECT_TRUE(std::filesystem::exists(run.checkpoint_path()));
  EXPECT_TRUE(std::filesystem::exists(run.state_path()));
  run.prepare(RunDirectory::Start::kOverwrite);
  EXPECT_TRUE(std::filesystem::exists(run.checkpoint_path()));
  EXPECT_FALSE(std::filesystem::exists(run.state_path()));
}

// Two runs given one out_dir at once: the second is refused, new or resumed, before it touches
// anything (it had replaced the first's checkpoints and removed its saves in progress), and the
// folder is free again once the first has ended.
TEST(RunDirectoryStart, AFolderInUseByAnotherRunIsRefused) {
  TempDir dir;
  auto first = std::make_unique<RunDirectory>(dir.file("run"));
  first->prepare(RunDirectory::Start::kNew);
  dir.write("run/.ckpt.safetensors.tmp.1.2", "the first run's save in progress");
  for (const auto start : {RunDirectory::Start::kNew, RunDirectory::Start::kResume}) {
    RunDirectory second(dir.file("run"));
    try {
      second.prepare(start);
      ADD_FAILURE() << "a second run took a folder in use";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("is in use by another folio train"),
                std::string::npos)
          << error.what();
    }
  }
  EXPECT_TRUE(std::filesystem::exists(dir.file("run/.ckpt.safetensors.tmp.1.2")));
  first.reset();
  RunDirectory after(dir.file("run"));
  after.prepare(RunDirectory::Start::kResume);
}

// `--resume A --out_dir B`: B takes A's checkpoint and metrics byte for byte (a checkpoint over
// the copy's 1 MiB chunks too), A keeps its own, and its state is not copied (the run writes its
// own into B); the same folder named two ways is one folder.
TEST(RunDirectoryStart, AResumedRunMovedToAnotherFolderTakesItsModelAndMetrics) {
  TempDir dir;
  RunDirectory earlier(dir.file("a")), moved(dir.file("b"));
  earlier.prepare(RunDirectory::Start::kNew);
  std::string checkpoint(3 * (size_t(1) << 20) + 7, '\0');
  for (size_t i = 0; i < checkpoint.size(); ++i) checkpoint[i] = static_cast<char>(i * 131 % 251);
  dir.write("a/ckpt.safetensors", checkpoint);
  dir.write("a/metrics.jsonl", "{\"type\": \"eval\", \"step\": 0}\n");
  dir.write("a/state.safetensors", "state");
  EXPECT_TRUE(same_folder(dir.file("a"), dir.file("a") + "/."));
  EXPECT_FALSE(same_folder(dir.file("a"), dir.file("b")));  // b is not there yet
  moved.prepare(RunDirectory::Start::kNew);
  moved.take_over(earlier.path());
  EXPECT_EQ(read_all(moved.checkpoint_path()), checkpoint);
  EXPECT_EQ(read_all(moved.metrics_path()), "{\"type\": \"eval\", \"step\": 0}\n");
  EXPECT_FALSE(std::filesystem::exists(moved.state_path()));
  EXPECT_EQ(read_all(earlier.checkpoint_path()), checkpoint);
}

// A state records the ranks that trained it (a resume on other ranks would change the global
// batch and is refused); one written before they were recorded still loads, the ranks unknown.
TEST(TrainingStateFile, RecordsTheRanksAndReadsAStateWrittenWithoutThem) {
  TempDir dir;
  TrainingState state;
  state.config = wide_gpt2_config(false);
  state.tokenizer = Tokenizer(vocabulary());
  state.data_sha256 = "identity";
  state.parameters = state.first_moment = state.second_moment = values(10, 3);
  state.world_size = 3;
  const std::string path = dir.file("state.safetensors");
  save_training_state(path, state);
  EXPECT_EQ(load_training_state(path).world_size, 3);

  const SafetensorsFile file = SafetensorsFile::read(path);
  std::map<std::string, std::string> earlier = file.metadata();
  for (const char* added : {"world_size", "data_sha256", "header_sha256"}) earlier.erase(added);
  const std::vector<float> tensor = state.parameters;
  write_safetensors(path,
                    {{"parameters", {10}, tensor.data()},
                     {"adam_m", {10}, tensor.data()},
                     {"adam_v", {10}, tensor.data()}},
                    earlier);
  const TrainingState loaded = load_training_state(path);
  EXPECT_EQ(loaded.world_size, 0);
  EXPECT_EQ(loaded.parameters, state.parameters);
}

}  // namespace
}  // namespace folio
