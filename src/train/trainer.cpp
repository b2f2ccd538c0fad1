#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/sha256.h"
#include "core/text_format.h"
#include "data/batches.h"
#include "data/epoch_sampler.h"
#include "io/checkpoint.h"
#include "io/metrics_log.h"
#include "io/safetensors.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "train/evaluate.h"
#include "train/init_from_check.h"
#include "train/mfu.h"
#include "progress/progress.h"
#include "train/stop_signal.h"

namespace folio {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The CPU backend's "device" memory is host memory: collectives can work on it in place.
bool device_memory_is_host(const Backend& backend) { return backend.name() == "cpu"; }

// Checks at start that out_dir can take files (better now than after an hour of training) and
// does not hold another run's checkpoint, which the new run's first save would replace; clears
// temporary files that a run killed in the middle of a save left behind.
void prepare_out_dir(const std::string& out_dir, bool continuing_or_overwriting) {
  std::error_code error;
  if (!continuing_or_overwriting)
    for (const char* name : {"ckpt.safetensors", "state.safetensors"})
      if (std::filesystem::exists(std::filesystem::path(out_dir) / name))
        throw Error("out_dir " + out_dir + " already holds a run (" + name +
                    "): continue it with --resume " + out_dir +
                    ", or choose another --out_dir, or pass --overwrite to replace it");
  std::filesystem::create_directories(out_dir, error);
  if (error || !std::filesystem::is_directory(out_dir))
    throw Error("cannot create out_dir " + out_dir + ": " + error.message());
  for (const auto& entry : std::filesystem::directory_iterator(out_dir, error)) {
    const std::string name = entry.path().filename().string();
    for (const char* prefix :
         {".ckpt.safetensors.tmp.", ".state.safetensors.tmp.", ".metrics.jsonl.tmp."})
      if (name.rfind(prefix, 0) == 0) std::filesystem::remove(entry.path(), error);
  }
  const std::string probe = (std::filesystem::path(out_dir) / ".folio_write_test").string();
  std::ofstream file(probe);
  file << "ok";
  file.close();
  if (!file)
    throw Error("out_dir " + out_dir + " is not writable (or the disk is full): pass --out_dir "
                "with a folder you can write to");
  std::filesystem::remove(probe, error);
}

// Everything that must be equal on all ranks for their gradients to be summable: the config
// (minus what may differ per host) and the text.
std::string agreement_digest(const Config& config, const std::string& data_sha256) {
  nlohmann::json json = config_to_json(config);
  for (const char* per_rank : {"threads", "device", "out_dir", "data", "log_interval",
                               "dist_timeout", "sample_tokens", "checkpoint_interval"})
    json.erase(per_rank);
  return sha256_hex(json.dump() + "\n" + data_sha256);
}

// Keeps the records a resumed run would have written: evaluations before `steps_done` (an
// evaluation at step s runs before step s's update) and training records up to it.
void truncate_metrics_log(const std::string& path, int64_t steps_done) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    try {
      const nlohmann::json record = nlohmann::json::parse(line);
      const int64_t step = record.at("step").get<int64_t>();
      const bool is_eval = record.at("type") == "eval";
      if (is_eval ? step < steps_done : step <= steps_done) kept += line + "\n";
    } catch (const nlohmann::json::exception&) {
      // A line cut short by the kill: drop it.
    }
  }
  in.close();
  // Atomically: a kill between truncating and rewriting the file would lose the whole log.
  write_file_atomically(path, kept);
}

class Trainer {
 public:
  Trainer(const Config& config, const TextDataset& data, Backend& backend,
          Communicator& communicator, const TrainOptions& options);
  TrainResult run();

 private:
  bool is_root() const { return communicator_.is_root(); }
  void start_from_parameters();
  void check_ranks_agree_on_setup();
  void check_ranks_agree_on_weights(int step);
  std::optional<SplitLosses> evaluate(int step);
  // Returns the step's global mean loss when `measure_loss`, else NaN (reading the loss waits for
  // the device).
  double train_step(int step, bool measure_loss);
  void sum_gradients_over_ranks();
  void stop_if_not_finite(int step, double loss);
  void save_state(int64_t steps_done);
  bool stop_agreed();
  void print_sample(const char* when, uint32_t index);

  const Config config_;
  const TextDataset& data_;
  Backend& backend_;
  Communicator& communicator_;
  const TrainOptions options_;
  const int batch_size_, block_size_;
  const int64_t global_windows_;  // windows per step over all ranks and micro-steps
  GPT model_;
  AdamW optimizer_;
  Batch batch_;
  std::optional<EpochSampler> epoch_sampler_;
  DeviceBuffer squared_norm_;
  std::vector<float> host_gradients_;  // staging when the collectives cannot read device memory
  std::string checkpoint_path_, state_path_;
  std::optional<MetricsLog> metrics_;
  std::optional<TrainingProgress> progress_;
  double flops_per_token_ = 0, peak_flops_ = 0;  // for MFU
  int64_t start_step_ = 0;
  double best_val_loss_ = std::numeric_limits<double>::infinity();
  double earlier_seconds_ = 0;
  Clock::time_point session_start_ = Clock::now();
  TrainResult result_;
};

Trainer::Trainer(const Config& config, const TextDataset& data, Backend& backend,
                 Communicator& communicator, const TrainOptions& options)
    : config_(config), data_(data), backend_(backend), communicator_(communicator),
      options_(options), batch_size_(config.batch_size), block_size_(config.block_size),
      global_windows_(int64_t(communicator.world_size()) * config.batch_size * config.grad_accum),
      model_(backend, ModelShape::from_config(config, data.vocabulary.size())),
      optimizer_(model_, config), batch_(config.batch_size, config.block_size),
      squared_norm_(backend, sizeof(float)) {
  if (config.sampling == "epoch") epoch_sampler_.emplace(data.train(), block_size_, config.seed);
  checkpoint_path_ = (std::filesystem::path(config.out_dir) / "ckpt.safetensors").string();
  state_path_ = training_state_path(config.out_dir);
}

void Trainer::start_from_parameters() {
  if (options_.resume != nullptr) {
    const TrainingState& state = *options_.resume;
    if (state.parameters.size() != model_.parameter_count())
      throw Error("the training state has " + std::to_string(state.parameters.size()) +
                  " parameters but the config's model has " +
                  std::to_string(model_.parameter_count()));
    model_.write_parameters(state.parameters);
    const size_t bytes = state.parameters.size() * sizeof(float);
    backend_.copy_to_device(optimizer_.first_moment(), state.first_moment.data(), bytes);
    backend_.copy_to_device(optimizer_.second_moment(), state.second_moment.data(), bytes);
    optimizer_.set_steps_taken(state.optimizer_steps);
    start_step_ = state.steps_done;
    best_val_loss_ = state.best_val_loss;
    earlier_seconds_ = state.elapsed_seconds;
    return;  // every rank read the same file: nothing to broadcast
  }
  if (!options_.init_from.empty()) {
    const LoadedCheckpoint checkpoint = load_checkpoint(options_.init_from, config_,
                                                        &data_.vocabulary);
    const std::string mismatch = init_from_mismatch(checkpoint, model_.shape(), data_.vocabulary);
    if (!mismatch.empty() || checkpoint.parameters.size() != model_.parameter_count())
      throw Error("--init_from " + options_.init_from + " does not fit this run: " + mismatch);
    model_.write_parameters(checkpoint.parameters);
  } else {
    model_.initialize(config_.seed, config_.init_std, config_.scaled_residual_init);
  }
  // As DistributedDataParallel does: every rank starts from rank 0's weights.
  if (communicator_.world_size() > 1) {
    std::vector<float> parameters = model_.read_parameters();
    communicator_.broadcast(parameters.data(), parameters.size() * sizeof(float));
    model_.write_parameters(parameters);
  }
}

void Trainer::check_ranks_agree_on_setup() {
  if (communicator_.world_size() == 1) return;
  const std::string mine = agreement_digest(config_, data_.file_sha256);
  std::string all(mine.size() * communicator_.world_size(), '\0');
  communicator_.all_gather(mine.data(), all.data(), mine.size());
  for (int r = 0; r < communicator_.world_size(); ++r)
    if (all.compare(r * mine.size(), mine.size(), all, 0, mine.size()) != 0)
      throw Error("rank " + std::to_string(r) +
                  " runs a different config or data file than rank 0 (config and text checksums "
                  "differ): give every rank the same --config, overrides and text");
}

void Trainer::check_ranks_agree_on_weights(int step) {
  if (communicator_.world_size() == 1) return;
  const std::vector<float> parameters = model_.read_parameters();
  const std::string mine = sha256_hex(std::string_view(
      reinterpret_cast<const char*>(parameters.data()), parameters.size() * sizeof(float)));
  std::string all(mine.size() * communicator_.world_size(), '\0');
  communicator_.all_gather(mine.data(), all.data(), mine.size());
  for (int r = 1; r < communicator_.world_size(); ++r)
    if (all.compare(r * mine.size(), mine.size(), all, 0, mine.size()) != 0)
      throw Error("step " + std::to_string(step) + ": the weights of rank " + std::to_string(r) +
                  " differ from rank 0's: the ranks have diverged (a non-deterministic "
                  "collective or a hardware fault); stopping");
}

std::optional<SplitLosses> Trainer::evaluate(int step) {
  const auto share = estimate_loss_share(model_, data_, config_, static_cast<uint32_t>(step),
                                         communicator_.rank(), communicator_.world_size(),
                                         [&] { return !stop_agreed(); });
  if (!share) return std::nullopt;
  // Sum the ranks' shares (in double precision, through two floats each: value and remainder).
  double sums[2] = {share->train, share->val};
  float pieces[4];
  for (int i = 0; i < 2; ++i) {
    pieces[2 * i] = static_cast<float>(sums[i]);
    pieces[2 * i + 1] = static_cast<float>(sums[i] - pieces[2 * i]);
  }
  communicator_.all_reduce_sum(pieces, 4);
  const double batches =
      double(config_.eval_iters) * config_.grad_accum * communicator_.world_size();
  return SplitLosses{(double(pieces[0]) + pieces[1]) / batches,
                     (double(pieces[2]) + pieces[3]) / batches};
}

void Trainer::sum_gradients_over_ranks() {
  if (communicator_.world_size() == 1) return;
  const size_t n = model_.parameter_count();
  if (device_memory_is_host(backend_) || communicator_.reduces_device_memory()) {
    communicator_.all_reduce_sum(model_.gradients(), n);
    return;
  }
  host_gradients_.resize(n);
  backend_.copy_to_host(host_gradients_.data(), model_.gradients(), n * sizeof(float));
  communicator_.all_reduce_sum(host_gradients_.data(), n);
  backend_.copy_to_device(model_.gradients(), host_gradients_.data(), n * sizeof(float));
}

double Trainer::train_step(int step, bool measure_loss) {
  const int world = communicator_.world_size(), rank = communicator_.rank();
  model_.zero_gradients();
  double loss = 0.0;
  for (int micro = 0; micro < config_.grad_accum; ++micro) {
    // This rank's windows of the global batch: global indices (micro * world + rank) * B + b.
    const int64_t first_window = (int64_t(micro) * world + rank) * batch_size_;
    if (epoch_sampler_) {
      epoch_sampler_->fill(batch_, uint64_t(step) * global_windows_ + first_window);
    } else {
      fill_random_batch(batch_, data_.train(), config_.seed, RandomPurpose::kTrainBatch,
                        static_cast<uint32_t>(step), static_cast<uint32_t>(first_window));
    }
    const DropoutContext dropout{static_cast<float>(config_.dropout), config_.seed,
                                 static_cast<uint32_t>(step),
                                 static_cast<uint32_t>(first_window)};
    model_.forward(batch_.inputs.data(), batch_.targets.data(), batch_size_, block_size_,
                   dropout);
    // Each position's loss weighs 1 / (all positions of the global batch): summing the ranks'
    // gradients then gives the gradient of the global mean loss.
    model_.backward(1.0f / (static_cast<float>(global_windows_) * block_size_));
    if (measure_loss) loss += model_.mean_loss();
  }
  sum_gradients_over_ranks();
  if (!measure_loss) return std::numeric_limits<double>::quiet_NaN();
  float global_loss = static_cast<float>(loss / config_.grad_accum);
  communicator_.all_reduce_sum(&global_loss, 1);
  return static_cast<double>(global_loss) / world;
}

void Trainer::stop_if_not_finite(int step, double loss) {
  const size_t n = model_.parameter_count();
  backend_.sum_of_squares(squared_norm_.as<float>(), model_.gradients(), n);
  float squared_norm = 0.0f;
  backend_.copy_to_host(&squared_norm, squared_norm_.get(), sizeof(float));
  if (std::isfinite(squared_norm) && std::isfinite(loss)) return;
  std::string culprit = "the loss";
  const std::vector<float> gradients = model_.read_gradients();
  for (const ParameterTensor& tensor : model_.layout().tensors()) {
    bool finite = true;
    for (size_t i = 0; i < tensor.size && finite; ++i)
      finite = std::isfinite(gradients[tensor.offset + i]);
    if (!finite) {
      culprit = "the gradient of " + tensor.name;
      break;
    }
  }
  throw Error("step " + std::to_string(step) + ": " + culprit +
              " is not finite (NaN or Inf); training stopped before applying it, and " +
              (std::isinf(best_val_loss_) ? std::string("this run saved no checkpoint")
                                          : "the last good checkpoint is " + checkpoint_path_) +
              "; lower learning_rate or set grad_clip");
}

void Trainer::save_state(int64_t steps_done) {
  if (!is_root()) return;
  TrainingState state;
  state.config = config_;
  state.vocabulary = data_.vocabulary;
  state.data_sha256 = data_.file_sha256;
  state.steps_done = steps_done;
  state.optimizer_steps = optimizer_.steps_taken();
  state.best_val_loss = best_val_loss_;
  state.elapsed_seconds = earlier_seconds_ + seconds_since(session_start_);
  state.parameters = model_.read_parameters();
  const size_t n = model_.parameter_count();
  state.first_moment.resize(n);
  state.second_moment.resize(n);
  backend_.copy_to_host(state.first_moment.data(), optimizer_.first_moment(), n * sizeof(float));
  backend_.copy_to_host(state.second_moment.data(), optimizer_.second_moment(),
                        n * sizeof(float));
  for (float value : state.parameters)
    if (!std::isfinite(value))
      throw Error("refusing to write " + state_path_ + ": the parameters hold a non-finite value");
  save_training_state(state_path_, state);
  note_state_saved(steps_done);
}

bool Trainer::stop_agreed() {
  int64_t stop = stop_requested() ? 1 : 0;
  communicator_.all_reduce_max(&stop, 1);
  return stop != 0;
}

void Trainer::print_sample(const char* when, uint32_t index) {
  if (!is_root() || config_.sample_tokens <= 0) return;
  if (progress_) progress_->clear();  // the sample streams to stdout character by character
  std::cout << "--- sample " << when << " training (" << config_.sample_tokens
            << " characters) ---\n";
  SamplingOptions sampling;
  sampling.max_new_tokens = config_.sample_tokens;
  sampling.seed = config_.seed;
  std::string piece;
  generate(model_, {}, sampling, index, [&](int32_t id) {
    piece.clear();
    data_.vocabulary.append_decoded(piece, id);
    std::cout << piece << std::flush;
  });
  std::cout << "\n--- end of sample ---\n" << std::flush;
}

TrainResult Trainer::run() {
  start_from_parameters();
  check_ranks_agree_on_setup();
  if (is_root()) {
    prepare_out_dir(config_.out_dir, options_.resume != nullptr || options_.overwrite);
    const std::string metrics_path =
        (std::filesystem::path(config_.out_dir) / "metrics.jsonl").string();
    if (options_.resume) truncate_metrics_log(metrics_path, start_step_);
    metrics_.emplace(metrics_path, options_.resume != nullptr);
    // As the seed: print(sum(p.numel() for p in model.parameters())/1e6, 'M parameters')
    std::cout << shortest_double(static_cast<double>(model_.parameter_count()) / 1e6)
              << " M parameters\n";
    std::cout << "device " << backend_.description() << "; data " << data_.path << ": "
              << data_.tokens.size() << " characters, vocabulary " << data_.vocabulary.size()
              << ", train " << data_.train().size() << ", val " << data_.val().size() << "\n";
    if (communicator_.world_size() > 1)
      std::cout << "distributed: " << communicator_.world_size() << " ranks started by "
                << options_.launcher << ", collectives over " << communicator_.name()
                << "; global batch " << communicator_.world_size() << " x " << batch_size_
                << " x " << config_.grad_accum << " = " << global_windows_ << " windows\n";
    if (options_.resume)
      std::cout << "resuming at step " << start_step_ << " of " << config_.max_iters << "\n";
    std::cout << std::flush;
  }
  model_.plan(batch_size_, block_size_, /*with_gradients=*/true);
  if (!options_.resume) print_sample("before", 0);
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

  const int64_t tokens_per_step = global_windows_ * block_size_;
  Clock::time_point window_start = Clock::now();
  int window_steps = 0;
  for (int step = static_cast<int>(start_step_); step < config_.max_iters; ++step) {
    if (step % config_.eval_interval == 0 || step == config_.max_iters - 1) {
      const std::optional<SplitLosses> losses = evaluate(step);
      if (!losses) {  // a stop signal arrived during the evaluation: redo it on resume
        save_state(step);
        result_.interrupted = true;
        result_.steps_done = step;
        break;
      }
      check_ranks_agree_on_weights(step);
      result_.last_train_loss = losses->train;
      result_.last_val_loss = losses->val;
      progress_->eval_done(step, losses->train, losses->val);
      if (is_root()) {
        metrics_->write({{"type", "eval"}, {"step", step}, {"train_loss", losses->train},
                         {"val_loss", losses->val},
                         {"time_s", earlier_seconds_ + seconds_since(session_start_)},
                         {"tokens", tokens_per_step * step}});
      }
      if (losses->val < best_val_loss_) {
        best_val_loss_ = losses->val;
        if (is_root()) {
          save_checkpoint(checkpoint_path_, model_, config_, data_.vocabulary, step,
                          losses->train, losses->val);
          note_checkpoint_saved(step);
          progress_->line("step " + std::to_string(step) + ": val loss improved, saved " +
                          checkpoint_path_);
        }
      }
      window_start = Clock::now();  // progress timing leaves out the evaluation
      window_steps = 0;
    }

    const double learning_rate = learning_rate_at(config_, step);
    // On the CPU the loss and the gradients' finiteness cost nothing to read, so every step is
    // checked; on a GPU reading them waits for the device, so only logged steps are (the step
    // named in an error is then the first logged step after the damage).
    const bool log_now = config_.log_interval > 0 && (step + 1) % config_.log_interval == 0;
    const bool measure = device_memory_is_host(backend_) || log_now;
    const double loss = train_step(step, measure);
    if (measure) stop_if_not_finite(step, loss);
    optimizer_.step(learning_rate);
    ++window_steps;
    result_.steps_done = step + 1;

    StepReport report{.step = step + 1};
    if (is_root() && log_now) {
      const double seconds = seconds_since(window_start);
      report.loss = loss;
      report.learning_rate = learning_rate;
      report.ms_per_step = 1000.0 * seconds / window_steps;
      report.tokens_per_second = tokens_per_step * window_steps / seconds;
      report.mfu = model_flops_utilization(report.tokens_per_second, flops_per_token_,
                                           peak_flops_);
      nlohmann::json record = {{"type", "train"}, {"step", step + 1}, {"loss", loss},
                               {"lr", learning_rate}, {"ms_per_step", report.ms_per_step},
                               {"tokens_per_s", report.tokens_per_second},
                               {"time_s", earlier_seconds_ + seconds_since(session_start_)},
                               {"tokens", tokens_per_step * (step + 1)}};
      if (std::isfinite(report.mfu)) record["mfu"] = report.mfu;  // JSON has no NaN
      metrics_->write(record);
      window_start = Clock::now();
      window_steps = 0;
    }
    progress_->step_done(report);
    if (config_.checkpoint_interval > 0 && (step + 1) % config_.checkpoint_interval == 0 &&
        step + 1 < config_.max_iters)
      save_state(step + 1);
    if (stop_agreed()) {
      save_state(step + 1);
      result_.interrupted = true;
      break;
    }
  }
  if (!result_.interrupted) {
    save_state(std::max<int64_t>(start_step_, config_.max_iters));
    result_.steps_done = std::max<int64_t>(start_step_, config_.max_iters);
  }
  result_.best_val_loss = best_val_loss_;
  result_.seconds = earlier_seconds_ + seconds_since(session_start_);
  progress_->finish();
  if (is_root()) {
    if (result_.interrupted) {
      std::printf("interrupted after %lld of %d steps; the training state is saved in %s: "
                  "resume with `folio train --resume %s`\n",
                  static_cast<long long>(result_.steps_done), config_.max_iters,
                  state_path_.c_str(), config_.out_dir.c_str());
    } else {
      print_sample("after", 1);
      if (std::isinf(best_val_loss_))  // no evaluation ran (max_iters 0): no checkpoint
        std::printf("trained %lld steps in %.1f s; no evaluation ran, so no checkpoint was "
                    "written (the training state is in %s)\n",
                    static_cast<long long>(result_.steps_done), result_.seconds,
                    state_path_.c_str());
      else
        std::printf("trained %lld steps in %.1f s; best val loss %.4f (checkpoint %s)\n",
                    static_cast<long long>(result_.steps_done), result_.seconds, best_val_loss_,
                    checkpoint_path_.c_str());
    }
    std::fflush(stdout);
  }
  return result_;
}

}  // namespace

TrainResult train(const Config& config, const TextDataset& data, Backend& backend,
                  Communicator& communicator, const TrainOptions& options) {
  Trainer trainer(config, data, backend, communicator, options);
  return trainer.run();
}

}  // namespace folio
