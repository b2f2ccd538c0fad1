#include "io/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/whole_file.h"

namespace folio {

namespace {

constexpr const char* kCheckpoint = "ckpt.safetensors";
constexpr const char* kState = "state.safetensors";
constexpr const char* kMetrics = "metrics.jsonl";
constexpr const char* kMetricsTable = "metrics.csv";

std::string in(const std::string& out_dir, const char* name) {
  return (std::filesystem::path(out_dir) / name).string();
}

}  // namespace

std::string RunDirectory::checkpoint_path() const {
  return in(out_dir_, kCheckpoint);
}
std::string RunDirectory::state_path() const {
  return in(out_dir_, kState);
}
std::string RunDirectory::metrics_path() const {
  return in(out_dir_, kMetrics);
}

struct RunDirectory::Hold {
  int fd = -1;
  ~Hold() {
    if (fd >= 0) ::close(fd);
  }
};

void RunDirectory::hold_folder() {
  if (hold_) return;  // prepared before by this object
  auto hold = std::make_shared<Hold>();
  hold->fd = ::open(out_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (hold->fd < 0) return;  // the check that the folder takes files says what is wrong
  if (::flock(hold->fd, LOCK_EX | LOCK_NB) == 0) {
    hold_ = std::move(hold);
    return;
  }
  if (errno == EWOULDBLOCK)
    throw Error("out_dir " + out_dir_ +
                " is in use by another folio train: wait for it to end, or choose another "
                "--out_dir (two runs in one folder would replace each other's checkpoints)");
  // A file system without flock (some network ones): the run goes on unheld.
}

void RunDirectory::prepare(Start start) {
  std::error_code error;
  make_output_folder(out_dir_, "--out_dir");
  hold_folder();
  if (start == Start::kNew)
    for (const char* name : {kCheckpoint, kState})
      if (std::filesystem::exists(in(out_dir_, name)))
        throw Error("out_dir " + out_dir_ + " already holds a run (" + name +
                    "): continue it with --resume " + out_dir_ +
                    ", or choose another --out_dir, or pass --overwrite to replace it");
  if (start == Start::kOverwrite) {
    std::filesystem::remove(state_path(), error);
    if (error)
      throw Error("--overwrite could not remove " + state_path() + " (" + error.message() +
                  "): remove it yourself, or choose another --out_dir");
  }
  for (const auto& entry : std::filesystem::directory_iterator(out_dir_, error)) {
    const std::string name = entry.path().filename().string();
    for (const char* file : {kCheckpoint, kState, kMetrics, kMetricsTable}) {
      std::string temporary = ".";  // .NAME.tmp.PID.RANDOM
      temporary.append(file).append(".tmp.");
      if (name.rfind(temporary, 0) == 0) std::filesystem::remove(entry.path(), error);
    }
  }
  const std::string probe = in(out_dir_, ".folio_write_test");
  std::ofstream file(probe);
  file << "ok";
  file.close();
  if (!file)
    throw Error("out_dir " + out_dir_ +
                " is not writable (or the disk is full): pass --out_dir "
                "with a folder you can write to");
  std::filesystem::remove(probe, error);
}

void RunDirectory::take_over(const std::string& earlier_dir) const {
  for (const char* name : {kCheckpoint, kMetrics}) {
    const std::string from = in(earlier_dir, name);
    std::ifstream source(from, std::ios::binary);
    if (!source) continue;  // none yet: no evaluation ran, or no record was written
    write_file_atomically(in(out_dir_, name), [&](AtomicFileWriter& out) {
      std::vector<char> chunk(size_t(1) << 20);
      while (source.read(chunk.data(), std::streamsize(chunk.size())) || source.gcount() > 0)
        out.write(chunk.data(), size_t(source.gcount()));
      if (source.bad())
        throw Error("cannot read " + from + " to continue the run in " + out_dir_ +
                    ": resume it in " + earlier_dir + " itself (--resume " + earlier_dir + ")");
    });
  }
}

bool same_folder(const std::string& a, const std::string& b) {
  std::error_code error;
  return std::filesystem::equivalent(a, b, error) && !error;
}

void RunDirectory::truncate_metrics(int64_t steps_done) const {
  std::ifstream input(metrics_path());
  if (!input) return;
  std::string kept, line;
  while (std::getline(input, line)) {
    try {
      const nlohmann::json record = nlohmann::json::parse(line);
      // a whole number, as folio writes it (get<int64_t> of an edited 1e300 would be undefined)
      if (!record.at("step").is_number_integer()) continue;
      const int64_t step = record.at("step").get<int64_t>();
      // An evaluation at step s runs before step s's update.
      const bool is_eval = record.at("type") == "eval";
      if (is_eval ? step < steps_done : step <= steps_done) kept += line + "\n";
    } catch (const nlohmann::json::exception&) {
      // A line cut short by the kill: drop it.
    }
  }
  input.close();
  // Atomically: a kill between truncating and rewriting the file would lose the whole log.
  write_file_atomically(metrics_path(), kept);
}

}  // namespace folio
