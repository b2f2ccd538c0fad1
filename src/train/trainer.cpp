#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/sha256.h"
#include "core/text_format.h"
#include "data/batches.h"
#include "data/epoch_sampler.h"
#include "io/background_writes.h"
#include "io/checkpoint.h"
#include "io/hf_gpt2.h"
#include "io/metrics_log.h"
#include "io/run_directory.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "optim/lr_schedule.h"
#include "progress/progress.h"
#include "train/evaluate.h"
#include "train/init_from_check.h"
#include "train/mfu.h"
#include "train/stop_signal.h"
#include "train/training_step.h"

namespace folio {

namespace {

using Clock = std::chrono::steady_clock;

// What the checkpoint in a resumed run's folder records of the run's best model: its val loss
// and step (infinity and -1 where it is not this run's model), and why it is not (empty when it
// is, or when there is no file). Only its header is read (load_checkpoint leaves the values in the
// file). A run's model has the run's model and recipe (the keys a resume keeps): a folder reused
// with --overwrite holds the earlier run's checkpoint until the new run writes its own.
struct RecordedCheckpoint {
  double val_loss = std::numeric_limits<double>::infinity();
  int64_t step = -1;
  std::string not_this_runs;
};
RecordedCheckpoint recorded_checkpoint(const std::string& path, const Config& config) {
  RecordedCheckpoint recorded;
  if (!std::filesystem::exists(path)) return recorded;
  try {
    const LoadedCheckpoint checkpoint = load_checkpoint(path, config, nullptr);
    if (!checkpoint.written_by_folio || checkpoint.val_loss < 0 || checkpoint.step < 0) {
      recorded.not_this_runs = "it records no training run of folio's";
      return recorded;
    }
    if (const auto differ = kept_keys_that_differ(checkpoint.config, config); !differ.empty()) {
      const ConfigKey& key = *differ.front();
      recorded.not_this_runs = "it is another run's model (" + std::string(key.name) + " " +
                               get_config_value(checkpoint.config, key) + ", not " +
                               get_config_value(config, key) + ")";
      return recorded;
    }
    recorded.val_loss = checkpoint.val_loss;
    recorded.step = checkpoint.step;
  } catch (const Error& error) {
    recorded.not_this_runs = error.what();  // damaged, or not a checkpoint
  }
  return recorded;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Everything that must be equal on all ranks for their gradients to be summable: the config
// keys whose scope says so (config_keys.cpp) and the data (its identity, data/dataset.h).
std::string agreement_digest(const Config& config, const std::string& data_sha256) {
  std::string text;
  for (const ConfigKey& key : config_keys())
    if (ranks_must_agree(key))
      text += std::string(key.name) + "=" + get_config_value(config, key) + "\n";
  return sha256_hex(text + data_sha256);
}

class Trainer {
 public:
  Trainer(const Config& config, const Dataset& data, Backend& backend, Communicator& communicator,
          const TrainOptions& options);
  TrainResult run();

 private:
  // ---- the phases of run(), in order ----
  void start_from_parameters();
  void check_ranks_agree_on_setup();
  void open_run_directory();
  void print_header();
  void start_progress();
  bool is_evaluation_step(int step) const;
  // Estimates both losses, records them, checkpoints when val improved. False when a stop
  // signal cut the evaluation short.
  bool evaluate_and_checkpoint(int step);
  // Returns the step's loss when it was measured, else NaN.
  double train_one_step(int step, double learning_rate);
  void log_step(int step, double loss, double learning_rate);
  void save_state_if_due(int step);
  void stop_after(int64_t steps_done);
  void print_summary();

  // ---- helpers ----
  bool is_root() const { return communicator_.is_root(); }
  bool log_interval_reached(int step) const {
    return config_.log_interval > 0 && (step + 1) % config_.log_interval == 0;
  }
  void check_ranks_agree_on_weights(int step);
  std::optional<SplitLosses> estimate_loss(int step);
  void fill_train_batch(Batch& batch, uint32_t step, int64_t first_window);
  void save_state(int64_t steps_done);
  // Says what the background write has written, once it is done (never waits); with
  // wait_for_it, waits for it first. Throws its error.
  void report_written_files(bool wait_for_it);
  bool stop_agreed();
  void print_sample(const char* when, uint32_t index);
  double seconds_trained() const { return earlier_seconds_ + seconds_since(session_start_); }

  const Config config_;
  const Dataset& data_;
  Backend& backend_;
  Communicator& communicator_;
  const TrainOptions options_;
  RunDirectory run_directory_;
  GPT model_;
  TrainingStep training_;
  const int64_t tokens_per_step_;
  std::optional<EpochSampler> epoch_sampler_;
  std::optional<MetricsLog> metrics_;
  std::optional<TrainingProgress> progress_;
  double flops_per_token_ = 0, peak_flops_ = 0;  // for MFU
  int64_t start_step_ = 0;
  double best_val_loss_ = std::numeric_limits<double>::infinity();
  double earlier_seconds_ = 0;
  Clock::time_point session_start_ = Clock::now();
  // The steps since the last progress line, which it reports the speed of.
  Clock::time_point window_start_ = Clock::now();
  int window_steps_ = 0;
  TrainResult result_;
  // Last: destroyed first, waiting for its write while what the write reads (config_, data_'s
  // tokenizer) still exists.
  BackgroundWrites writes_;
};

Trainer::Trainer(const Config& config, const Dataset& data, Backend& backend,
                 Communicator& communicator, const TrainOptions& options)
    : config_(config),
      data_(data),
      backend_(backend),
      communicator_(communicator),
      options_(options),
      run_directory_(config.out_dir),
      model_(backend, ModelShape::from_config(config, data.tokenizer().size())),
      training_(model_, config, communicator),
      tokens_per_step_(training_.split().global_windows() * config.block_size) {
  if (config.sampling == "epoch")
    epoch_sampler_.emplace(data.train(), config.block_size, config.seed);
}

// The seed's loop: evaluate every eval_interval steps and at the last, then one training step.
TrainResult Trainer::run() {
  // First: the broadcast of the weights that follows is only as long on every rank when their
  // configs and data agree (different vocabularies, different counts).
  check_ranks_agree_on_setup();
  start_from_parameters();
  open_run_directory();
  print_header();
  if (!options_.resume) print_sample("before", 0);
  start_progress();
  // The first progress line's speed counts from here, not from the loading and the header (a
  // resumed run's first step need not be an evaluation, which restarts the window too).
  window_start_ = Clock::now();
  window_steps_ = 0;
  for (int step = static_cast<int>(start_step_); step < config_.max_iters; ++step) {
    if (is_evaluation_step(step) && !evaluate_and_checkpoint(step)) {
      stop_after(step);  // the signal came during the evaluation: resume redoes it
      break;
    }
    const double learning_rate = learning_rate_at(config_, step);
    const double loss = train_one_step(step, learning_rate);
    log_step(step, loss, learning_rate);
    report_written_files(/*wait_for_it=*/false);
    save_state_if_due(step);
    if (stop_agreed()) {
      stop_after(step + 1);
      break;
    }
  }
  if (!result_.interrupted) {
    result_.steps_done = std::max<int64_t>(start_step_, config_.max_iters);
    save_state(result_.steps_done);
  }
  report_written_files(/*wait_for_it=*/true);  // the run has ended when its files are on disk
  result_.best_val_loss = best_val_loss_;
  result_.seconds = seconds_trained();
  progress_->finish();
  print_summary();
  return result_;
}

void Trainer::start_from_parameters() {
  AdamW& optimizer = training_.optimizer();
  if (options_.resume != nullptr) {
    const TrainingState& state = *options_.resume;
    if (state.parameters.size() != model_.parameter_count())
      throw Error("the training state has " + std::to_string(state.parameters.size()) +
                  " parameters but the config's model has " +
                  std::to_string(model_.parameter_count()));
    model_.write_parameters(state.parameters);
    const size_t bytes = state.parameters.size() * sizeof(float);
    backend_.copy_to_device(optimizer.first_moment(), state.first_moment.data(), bytes);
    backend_.copy_to_device(optimizer.second_moment(), state.second_moment.data(), bytes);
    optimizer.set_steps_taken(state.optimizer_steps);
    start_step_ = state.steps_done;
    best_val_loss_ = state.best_val_loss;
    // The checkpoint can be newer than the state: a run killed after an evaluation improved it
    // and before the next state save. Its val loss is the one to beat, or the evaluations
    // between the state's step and the checkpoint's would replace it with worse models (and a
    // resumed run stopping before that step would lose it). Only rank 0 writes checkpoints.
    // And a second Ctrl-C says which model the folder holds, from an earlier session or not.
    // Without a checkpoint of this run there (deleted, damaged, or another run's), there is
    // no model to beat: the next evaluation writes one, rather than the run ending with a best
    // val loss that no file holds.
    if (is_root()) {
      const std::string path = RunDirectory(options_.resume_dir).checkpoint_path();
      const RecordedCheckpoint recorded = recorded_checkpoint(path, config_);
      if (recorded.step >= 0) {
        best_val_loss_ = std::min(best_val_loss_, recorded.val_loss);
        note_checkpoint_saved(recorded.step);
      } else {
        if (!std::isinf(best_val_loss_) || !recorded.not_this_runs.empty()) {
          char best[64] = "";
          if (!std::isinf(best_val_loss_))
            std::snprintf(best, sizeof(best), " (val loss %.4f)", best_val_loss_);
          std::fprintf(stderr,
                       "folio: warning: %s does not hold this run's best model%s: %s; the next "
                       "evaluation writes one\n",
                       path.c_str(), best,
                       recorded.not_this_runs.empty() ? "it is missing"
                                                      : recorded.not_this_runs.c_str());
        }
        best_val_loss_ = std::numeric_limits<double>::infinity();
      }
    }
    earlier_seconds_ = state.elapsed_seconds;
    return;  // every rank read the same file: nothing to broadcast
  }
  if (!options_.init_from.empty()) {
    const LoadedCheckpoint checkpoint =  // a checkpoint, or a Hugging Face GPT-2 folder
        load_initial_weights(options_.init_from, config_, data_.tokenizer().characters());
    const std::string mismatch = init_from_mismatch(checkpoint, model_.shape(), data_.tokenizer());
    if (!mismatch.empty() || checkpoint.parameters->count() != model_.parameter_count())
      throw UsageError("--init_from " + options_.init_from + " does not fit this run on " +
                  data_.path() + ": " + mismatch);
    checkpoint.parameters->write_into(model_);
  } else {
    model_.initialize(config_.seed, config_.init_std, config_.scaled_residual_init,
                      init_scheme_of(config_));
  }
  // As DistributedDataParallel does: every rank starts from rank 0's weights. (Before any forward
  // pass: a GPU backend makes its bf16 mirror of the weights at the first one, from these.)
  communicator_.broadcast_device(model_.parameters(), model_.parameter_count());
}

void Trainer::check_ranks_agree_on_setup() {
  if (communicator_.world_size() == 1) return;
  const std::string mine = agreement_digest(config_, data_.identity());
  const std::vector<std::string> all = all_gather_strings(communicator_, mine, mine.size());
  for (int r = 1; r < communicator_.world_size(); ++r)
    if (all[r] != all[0])
      throw Error("rank " + std::to_string(r) +
                  " runs a different config or data file than rank 0 (config and text checksums "
                  "differ): give every rank the same --config, overrides and text");
  // And the same step: ranks that resumed unlike states (or some none) would train on, each from
  // its own weights' moments and step, until their weights were found to differ.
  const auto start_of = [](const std::string& step) {
    return step == "0" ? std::string("starts a new run") : "resumes at step " + step;
  };
  const std::vector<std::string> steps = all_gather_strings(
      communicator_, std::to_string(options_.resume ? options_.resume->steps_done : 0), 24);
  for (int r = 1; r < communicator_.world_size(); ++r)
    if (steps[r] != steps[0])
      throw Error("rank " + std::to_string(r) + " " + start_of(steps[r]) + " and rank 0 " +
                  start_of(steps[0]) +
                  ": every rank must resume the same training state (--resume DIR with the run's "
                  "folder, or a copy of it, on every rank)");
}

void Trainer::open_run_directory() {
  if (!is_root()) return;
  // `--resume A --out_dir B` moves the run: B takes A's model and metrics, and goes on as A
  // would have (it had held only the new records, and the run's summary named a checkpoint in B
  // that was never written). B is a folder for a new run: one that holds another is refused.
  const bool moves = options_.resume && !same_folder(options_.resume_dir, config_.out_dir);
  const bool continues_here = options_.resume && !moves;
  run_directory_.prepare(continues_here      ? RunDirectory::Start::kResume
                         : options_.overwrite ? RunDirectory::Start::kOverwrite
                                              : RunDirectory::Start::kNew);
  if (moves) run_directory_.take_over(options_.resume_dir);
  if (options_.resume) run_directory_.truncate_metrics(start_step_);
  metrics_.emplace(run_directory_.metrics_path(), options_.resume != nullptr);
}

void Trainer::print_header() {
  if (!is_root()) return;
  // As the seed: print(sum(p.numel() for p in model.parameters())/1e6, 'M parameters')
  std::cout << shortest_double(static_cast<double>(model_.parameter_count()) / 1e6)
            << " M parameters\n";
  std::cout << "device " << backend_.description() << "; data " << data_.path() << ": "
            << data_.summary() << ", train " << data_.train().size() << ", val "
            << data_.val().size() << "\n";
  const BatchSplit& split = training_.split();
  if (split.world > 1)
    std::cout << "distributed: " << split.world << " ranks started by " << options_.launcher
              << ", collectives over " << communicator_.name() << "; global batch " << split.world
              << " x " << split.batch_size << " x " << split.grad_accum << " = "
              << split.global_windows() << " windows\n";
  if (const int ways = training_.batch_split_ways(); ways > 1) {
    const auto [fewest, most] = training_.batch_split_share_windows();
    const std::string windows = fewest == most
                                    ? std::to_string(fewest)
                                    : std::to_string(fewest) + "-" + std::to_string(most);
    std::cout << "batch split: each micro-batch of " << split.batch_size << " windows in " << ways
              << " shares of " << windows << " windows, each on a thread of its own "
              << "(batch_split=off: every op on every thread)\n";
  }
  if (options_.resume)
    std::cout << "resuming at step " << start_step_ << " of " << config_.max_iters << "\n";
  std::cout << std::flush;
}

void Trainer::start_progress() {
  flops_per_token_ = training_flops_per_token(model_.shape(), model_.parameter_count());
  if (is_root()) {
    // The device's peak for MFU: a GPU's datasheet figure, a CPU's measured sgemm speed.
    const double device_peak = backend_.peak_flops();
    peak_flops_ = communicator_.world_size() *
                  (device_peak > 0 ? device_peak : measure_matmul_flops(backend_));
  }
  progress_.emplace(ProgressSettings{.total_steps = config_.max_iters,
                                     .first_step = start_step_,
                                     .quiet = options_.quiet,
                                     .is_printer = is_root()},
                    StatusLine::standard_output());
}

bool Trainer::is_evaluation_step(int step) const {
  return step % config_.eval_interval == 0 || step == config_.max_iters - 1;
}

bool Trainer::evaluate_and_checkpoint(int step) {
  const std::optional<SplitLosses> losses = estimate_loss(step);
  if (!losses) return false;
  check_ranks_agree_on_weights(step);
  result_.last_train_loss = losses->train;
  result_.last_val_loss = losses->val;
  progress_->eval_done(step, losses->train, losses->val);
  if (is_root())
    metrics_->write({{"type", "eval"},
                     {"step", step},
                     {"train_loss", losses->train},
                     {"val_loss", losses->val},
                     {"time_s", seconds_trained()},
                     {"tokens", tokens_per_step_ * step}});
  if (losses->val < best_val_loss_) {
    best_val_loss_ = losses->val;
    if (is_root()) {
      // The weights of this step, copied before training goes on; written behind its steps.
      report_written_files(/*wait_for_it=*/true);
      const std::string path = run_directory_.checkpoint_path();
      writes_.start(
          [path, shape = model_.shape(), weights = model_.read_parameters(), this, step,
           train_loss = losses->train, val_loss = losses->val] {
            save_checkpoint(path, shape, weights, config_, data_.tokenizer(), step, train_loss,
                            val_loss);
            note_checkpoint_saved(step);
          },
          "step " + std::to_string(step) + ": val loss improved, saved " + path);
    }
  }
  window_start_ = Clock::now();  // progress timing leaves out the evaluation
  window_steps_ = 0;
  return true;
}

std::optional<SplitLosses> Trainer::estimate_loss(int step) {
  const auto share =
      estimate_loss_share(model_, data_, config_, static_cast<uint32_t>(step), communicator_.rank(),
                          communicator_.world_size(), [&] { return !stop_agreed(); });
  if (!share) return std::nullopt;
  double sums[2] = {share->train, share->val};
  communicator_.all_reduce_sum_host(sums, 2);
  const double batches =
      double(config_.eval_iters) * config_.grad_accum * communicator_.world_size();
  return SplitLosses{sums[0] / batches, sums[1] / batches};
}

void Trainer::check_ranks_agree_on_weights(int step) {
  if (communicator_.world_size() == 1) return;
  const std::vector<float> parameters = model_.read_parameters();
  const std::string mine = sha256_hex(std::string_view(
      reinterpret_cast<const char*>(parameters.data()), parameters.size() * sizeof(float)));
  std::string all(mine.size() * communicator_.world_size(), '\0');
  communicator_.all_gather_host(mine.data(), all.data(), mine.size());
  for (int r = 1; r < communicator_.world_size(); ++r)
    if (all.compare(r * mine.size(), mine.size(), all, 0, mine.size()) != 0)
      throw Error("step " + std::to_string(step) + ": the weights of rank " + std::to_string(r) +
                  " differ from rank 0's: the ranks have diverged (a non-deterministic "
                  "collective or a hardware fault); stopping");
}

void Trainer::fill_train_batch(Batch& batch, uint32_t step, int64_t first_window) {
  if (epoch_sampler_) {
    epoch_sampler_->fill(
        batch, uint64_t(step) * training_.split().global_windows() + uint64_t(first_window));
  } else {
    fill_random_batch(batch, data_.train(), config_.seed, RandomPurpose::kTrainBatch, step,
                      static_cast<uint32_t>(first_window));
  }
}

double Trainer::train_one_step(int step, double learning_rate) {
  // Where the loss and the gradients' finiteness cost nothing to read (the CPU) every step is
  // checked; on a GPU reading them waits for the device, so only logged steps are (the step
  // named in an error is then the first logged step after the damage).
  const bool measure = backend_.reads_back_for_free() || log_interval_reached(step);
  training_.draw_batches(static_cast<uint32_t>(step),
                         [&](Batch& batch, uint32_t s, int64_t first_window) {
                           fill_train_batch(batch, s, first_window);
                         });
  // A step that reads nothing back replays the recorded one where the backend records (a GPU:
  // one launch instead of hundreds; the same bits).
  if (!measure && training_.replays()) {
    training_.replay_or_record(static_cast<uint32_t>(step), learning_rate);
    ++window_steps_;
    result_.steps_done = step + 1;
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double loss = training_.compute_gradients(static_cast<uint32_t>(step), measure);
  if (measure) {
    const std::string culprit = training_.first_non_finite(loss);
    if (!culprit.empty())
      throw Error("step " + std::to_string(step) + ": " + culprit +
                  " is not finite (NaN or Inf); training stopped before applying it, and " +
                  (std::isinf(best_val_loss_)
                       ? std::string("this run saved no checkpoint")
                       : "the last good checkpoint is " + run_directory_.checkpoint_path()) +
                  "; lower learning_rate or set grad_clip");
  }
  training_.update(learning_rate);
  ++window_steps_;
  result_.steps_done = step + 1;
  return loss;
}

void Trainer::log_step(int step, double loss, double learning_rate) {
  StepReport report{.step = step + 1};
  if (is_root() && log_interval_reached(step)) {
    const double seconds = seconds_since(window_start_);
    report.loss = loss;
    report.learning_rate = learning_rate;
    report.ms_per_step = 1000.0 * seconds / window_steps_;
    report.tokens_per_second = tokens_per_step_ * window_steps_ / seconds;
    report.mfu = model_flops_utilization(report.tokens_per_second, flops_per_token_, peak_flops_);
    nlohmann::json record = {{"type", "train"},
                             {"step", step + 1},
                             {"loss", loss},
                             {"lr", learning_rate},
                             {"ms_per_step", report.ms_per_step},
                             {"tokens_per_s", report.tokens_per_second},
                             {"time_s", seconds_trained()},
                             {"tokens", tokens_per_step_ * (step + 1)}};
    if (std::isfinite(report.mfu)) record["mfu"] = report.mfu;  // JSON has no NaN
    metrics_->write(record);
    window_start_ = Clock::now();
    window_steps_ = 0;
  }
  progress_->step_done(report);
}

void Trainer::save_state_if_due(int step) {
  if (config_.checkpoint_interval > 0 && (step + 1) % config_.checkpoint_interval == 0 &&
      step + 1 < config_.max_iters)
    save_state(step + 1);
}

void Trainer::stop_after(int64_t steps_done) {
  save_state(steps_done);
  result_.interrupted = true;
  result_.steps_done = steps_done;
}

void Trainer::print_summary() {
  if (!is_root()) return;
  if (result_.interrupted) {
    std::printf(
        "interrupted after %lld of %d steps; the training state is saved in %s: "
        "resume with `folio train --resume %s`\n",
        static_cast<long long>(result_.steps_done), config_.max_iters,
        run_directory_.state_path().c_str(), config_.out_dir.c_str());
  } else {
    print_sample("after", 1);
    if (std::isinf(best_val_loss_)) {  // no evaluation ran (max_iters 0): no checkpoint
      // --overwrite keeps the earlier run's checkpoint until this run writes one
      const std::string earlier =
          std::filesystem::exists(run_directory_.checkpoint_path())
              ? "; " + run_directory_.checkpoint_path() + " is an earlier run's"
              : "";
      std::printf("trained %lld steps in %.1f s; no evaluation ran, so no checkpoint was "
                  "written (the training state is in %s)%s\n",
                  static_cast<long long>(result_.steps_done), result_.seconds,
                  run_directory_.state_path().c_str(), earlier.c_str());
    } else {
      std::printf("trained %lld steps in %.1f s; best val loss %.4f (checkpoint %s)\n",
                  static_cast<long long>(result_.steps_done), result_.seconds, best_val_loss_,
                  run_directory_.checkpoint_path().c_str());
    }
  }
  std::fflush(stdout);
}

void Trainer::save_state(int64_t steps_done) {
  if (!is_root()) return;
  report_written_files(/*wait_for_it=*/true);
  const AdamW& optimizer = training_.optimizer();
  TrainingState state;
  state.config = config_;
  state.tokenizer = data_.tokenizer();
  state.data_sha256 = data_.identity();
  state.steps_done = steps_done;
  state.optimizer_steps = optimizer.steps_taken();
  state.best_val_loss = best_val_loss_;
  state.elapsed_seconds = seconds_trained();
  state.world_size = communicator_.world_size();
  state.parameters = model_.read_parameters();
  const size_t n = model_.parameter_count();
  state.first_moment.resize(n);
  state.second_moment.resize(n);
  backend_.copy_to_host(state.first_moment.data(), optimizer.first_moment(), n * sizeof(float));
  backend_.copy_to_host(state.second_moment.data(), optimizer.second_moment(), n * sizeof(float));
  for (float value : state.parameters)
    if (!std::isfinite(value))
      throw Error("refusing to write " + run_directory_.state_path() +
                  ": the parameters hold a non-finite value");
  writes_.start([path = run_directory_.state_path(), state = std::move(state), steps_done] {
    save_training_state(path, state);
    note_state_saved(steps_done);
  });
}

void Trainer::report_written_files(bool wait_for_it) {
  const std::string line = wait_for_it ? writes_.finish() : writes_.poll();
  if (!line.empty()) progress_->line(line);
}

bool Trainer::stop_agreed() {
  int64_t stop = stop_requested() ? 1 : 0;
  communicator_.all_reduce_max_host(&stop, 1);
  return stop != 0;
}

void Trainer::print_sample(const char* when, uint32_t index) {
  if (!is_root() || config_.sample_tokens <= 0) return;
  if (progress_) progress_->clear();  // the sample streams to stdout character by character
  const Tokenizer& tokenizer = data_.tokenizer();
  std::cout << "--- sample " << when << " training (" << config_.sample_tokens
            << (tokenizer.is_characters() ? " characters" : " tokens") << ") ---\n";
  SamplingOptions sampling;
  sampling.max_new_tokens = config_.sample_tokens;
  sampling.seed = config_.seed;
  StreamingDecoder decoder(tokenizer);
  generate(model_, {tokenizer.start_token()}, sampling, index,
           [&](int32_t id) { std::cout << decoder.push(id) << std::flush; });
  std::cout << decoder.finish() << "\n--- end of sample ---\n" << std::flush;
}

}  // namespace

TrainResult train(const Config& config, const Dataset& data, Backend& backend,
                  Communicator& communicator, const TrainOptions& options) {
  Trainer trainer(config, data, backend, communicator, options);
  return trainer.run();
}

}  // namespace folio
