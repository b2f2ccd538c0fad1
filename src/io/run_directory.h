// The files a training run writes into its out_dir, named in one place:
//
//   ckpt.safetensors   the model at its best val loss so far (io/checkpoint.h)
//   state.safetensors  everything `folio train --resume` needs (io/training_state.h)
//   metrics.jsonl      one JSON record per evaluation and logged step (io/metrics_log.h)
//   metrics.csv        the same records as a table
//
// Every file is replaced atomically through a hidden `.NAME.tmp.PID.RANDOM` beside it
// (write_file_atomically), which a run killed in the middle of a save leaves behind.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace folio {

class RunDirectory {
 public:
  explicit RunDirectory(std::string out_dir) : out_dir_(std::move(out_dir)) {}

  const std::string& path() const { return out_dir_; }
  std::string checkpoint_path() const;
  std::string state_path() const;
  std::string metrics_path() const;

  // What a run does with a folder that may hold an earlier run.
  enum class Start {
    kNew,        // refuses a folder that holds a run's checkpoint or state
    kResume,     // keeps them: `--resume` continues that run
    kOverwrite,  // removes the state (`--overwrite`): a kill before the new run saved its own
                 // left it for `--resume` to continue the old run under the new one's metrics;
                 // the checkpoint stays until the new run writes a better model (its first
                 // evaluation), so a run that fails first loses no good model
  };
  // At the start of a run: creates the folder, holds it (below), checks that it takes files
  // (better now than after an hour of training), removes the temporary files of an interrupted
  // save, and treats an earlier run's checkpoint and state as `start` says.
  //
  // The folder is held for as long as this object lives (an flock on the folder itself, which
  // the kernel lets go when the process ends, however it ends, and which leaves no file): a
  // second run given the same out_dir meanwhile, a new one or a second `--resume`, is refused,
  // where the two had replaced each other's checkpoints and states and mixed their metrics (and
  // the second's start removed the first's saves in progress).
  void prepare(Start start);

  // On resume into another folder (`--resume A --out_dir B`, after prepare(kNew)): copies A's
  // checkpoint and metrics into this folder (each atomically), so that it holds the whole run.
  void take_over(const std::string& earlier_dir) const;

  // On resume: keeps the metrics records the resumed run would have written (evaluations before
  // `steps_done`, training records up to it), dropping a line a kill cut short.
  void truncate_metrics(int64_t steps_done) const;

 private:
  void hold_folder();

  std::string out_dir_;
  struct Hold;  // the folder's open descriptor, closed (and so let go) with it
  std::shared_ptr<Hold> hold_;
};

// Whether two paths name one folder (`out/a`, `./out/a/`, a link to it); false when either is
// not there.
bool same_folder(const std::string& a, const std::string& b);

}  // namespace folio
