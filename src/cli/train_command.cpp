// folio train [--config NAME|FILE] [--data FILE] [--out_dir DIR] [--init_from CKPT]
//             [--resume DIR] [--nproc N|auto] [--KEY=VALUE ...]

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/thread_budget.h"
#include "config/presets.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/fetch.h"
#include "data/token_shards.h"
#include "distributed/launch_environment.h"
#include "distributed/local_ranks.h"
#include "distributed/make_communicator.h"
#include "io/hf_gpt2.h"
#include "io/training_state.h"
#include "progress/status_line.h"
#include "progress/task_progress.h"
#include "train/stop_signal.h"
#include "train/trainer.h"

namespace folio {

namespace {

const std::vector<std::string> kTrainOptions = {"config", "init_from", "resume", "nproc",
                                                "overwrite", "quiet", "print_config", "help"};

// SageMaker hands the data and the model folder over as channels: use them unless told otherwise.
void apply_sagemaker_channels(Config& config, const LaunchEnvironment& env) {
  if (config.data.empty() && !env.sagemaker_data_dir.empty()) {
    const std::filesystem::path dir(env.sagemaker_data_dir);
    if (std::filesystem::exists(dir / "train.bin") || !shard_paths(dir, "train").empty()) {
      config.data = dir.string();  // a channel of token files (folio prepare's folder)
    } else if (std::filesystem::exists(dir / "input.txt")) {
      config.data = (dir / "input.txt").string();
    } else {
      for (const auto& entry : std::filesystem::directory_iterator(dir))
        if (entry.is_regular_file()) {
          config.data = entry.path().string();
          break;
        }
    }
  }
  if (config.out_dir == "out" && !env.sagemaker_model_dir.empty())
    config.out_dir = env.sagemaker_model_dir;
}

// What `--resume DIR` says when the run has no steps left: it finished, or --max_iters asks for
// no more steps than it has done.
std::string nothing_left_to_train(const TrainingState& state, const Config& config,
                                  const std::string& run_dir) {
  const std::string done = std::to_string(state.steps_done);
  std::string text = "nothing to do: the run in " + run_dir + " has done " + done + " steps";
  if (config.max_iters == state.config.max_iters)
    text += ", all of its max_iters (finished)";
  else
    text += ", and --max_iters " + std::to_string(config.max_iters) + " asks for no more";
  text += "; to train further pass --max_iters above " + done;
  const std::string model = (std::filesystem::path(run_dir) / "ckpt.safetensors").string();
  if (std::filesystem::exists(model)) text += " (the model is in " + model + ")";
  return text + "\n";
}

std::string ranks_text(int count) {
  return std::to_string(count) + (count == 1 ? " rank" : " ranks");
}

// The ranks set the global batch, which a resume must keep as it keeps batch_size and grad_accum.
std::string other_world_size(const TrainingState& state, int world_size,
                             const std::string& run_dir) {
  const std::string trained_on = ranks_text(state.world_size);
  const std::string how = state.world_size == 1
                              ? "as one process (without --nproc or a launcher)"
                              : "on " + trained_on + " (folio train --nproc " +
                                    std::to_string(state.world_size) +
                                    ", or as many from its launcher)";
  return "--resume continues a run exactly, so the number of ranks (a factor of the global batch) "
         "cannot change: the run in " + run_dir + " trained on " + trained_on +
         " and this one has " + ranks_text(world_size) + "; resume it " + how +
         ", or start a new run with --init_from " + run_dir + "/ckpt.safetensors instead";
}

}  // namespace

std::string config_keys_help(const Config& defaults) {
  std::ostringstream out;
  std::string group;
  for (const ConfigKey& key : config_keys()) {
    if (group != key.group) {
      group = key.group;
      out << "\n  " << group << ":\n";
    }
    std::string value = get_config_value(defaults, key);
    if (value.empty()) value = "\"\"";
    out << "    --" << key.name << " (" << config_key_type(key) << ", " << value << "; "
        << scope_name(key.scope) << ")\n        " << key.help << "\n";
  }
  return out.str();
}

std::string config_keys_markdown(const Config& defaults) {
  std::ostringstream out;
  out << "| key | type | default | scope | meaning |\n| --- | --- | --- | --- | --- |\n";
  for (const ConfigKey& key : config_keys()) {
    std::string type = config_key_type(key), value = get_config_value(defaults, key);
    for (size_t bar = type.find('|'); bar != std::string::npos; bar = type.find('|', bar))
      type.replace(bar, 1, ", ");
    out << "| `" << key.name << "` | " << type << " | " << (value.empty() ? "" : "`" + value + "`")
        << " | " << scope_name(key.scope) << " | " << key.help << " |\n";
  }
  return out.str();
}

int train_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    // With --config NAME the defaults shown are that preset's (or file's).
    const std::string config_name = arguments.take("config").value_or("shakespeare_char");
    const Config defaults = load_config(config_name);
    if (arguments.take_flag("markdown")) {
      std::cout << config_keys_markdown(defaults);
      return 0;
    }
    std::cout << "usage: folio train [--config NAME|FILE] [--data FILE] [--out_dir DIR] "
                 "[--init_from CKPT|HF_DIR] [--resume DIR] [--nproc N|auto] [--overwrite] [--quiet] "
                 "[--print_config] [--KEY=VALUE ...]\n\n"
                 "Trains a GPT on a UTF-8 text file (its characters) or on a folder of token "
                 "files from folio prepare (--data DIR [--tokenizer gpt2|FILE|DIR]).\n"
                 "--config names a preset ("
              << preset_names()
              << "; default shakespeare_char) or a file of `key = value` lines; each\n"
                 "--KEY=VALUE then overrides one config key. --init_from starts from the weights "
                 "of a checkpoint or a Hugging Face GPT-2 folder,\nwith its config unless "
                 "--config is given. --resume DIR continues the run\nwhose out_dir is DIR exactly "
                 "where its last saved state left it. --nproc N starts N data-parallel ranks on "
                 "this machine.\nA new run refuses an out_dir that holds another run's "
                 "checkpoint unless --overwrite. --quiet shows no live progress.\n"
                 "--print_config prints the resolved config (preset, file, overrides, resumed "
                 "run) and exits.\n\n"
                 "A key's scope says when it may change: model keys are fixed by a checkpoint; "
                 "recipe keys by --resume too;\nrun keys may change on --resume; host keys may "
                 "also differ between ranks (every other key must agree).\n\n"
                 "config keys (type, default of "
              << config_name << "; scope):" << config_keys_help(defaults);
    return 0;
  }
  const LaunchEnvironment env = detect_launch_environment();
  // --nproc N above 1: this process becomes the launcher of N ranks, once the whole command is
  // checked here (each rank had printed the same mistake, then the launcher its exit code).
  int ranks_to_start = 1;
  if (arguments.has("nproc")) {
    // auto: one rank per GPU, as the seed's "We have 2 GPUs! Using 2 GPUs"; one on a CPU.
    const std::string nproc = arguments.take("nproc").value_or("1");
    if (nproc == "auto")
      ranks_to_start = std::max(1, visible_gpu_count());
    else
      arguments.collect([&] { ranks_to_start = parse_int_option("nproc", nproc, 1, 1024); });
    // Under a launcher of several ranks it had been ignored, each rank training as the launcher's.
    if (ranks_to_start > 1 && env.distributed())
      arguments.problem("--nproc " + nproc + " would start ranks of its own, but this process "
                        "is already rank " + std::to_string(env.rank) + " of " +
                        std::to_string(env.world_size) + " started by " + env.launcher_name() +
                        ": drop --nproc (the ranks come from one launcher)");
  }
  const int world_size = ranks_to_start > 1 ? ranks_to_start : env.world_size;

  const bool overwrite = arguments.take_flag("overwrite");
  const bool print_config = arguments.take_flag("print_config");
  const bool quiet = arguments.take_flag("quiet");
  const std::string resume_dir = arguments.take("resume").value_or("");
  const std::string init_from = arguments.take("init_from").value_or("");
  std::optional<TrainingState> state;
  Config config;
  std::vector<std::string> given;      // the config keys set on the command line
  std::vector<std::string> user_keys;  // those and the keys a --config FILE sets
  if (!resume_dir.empty()) {
    if (arguments.take("config"))
      arguments.problem("--resume takes the config of the run it resumes; drop --config");
    if (!init_from.empty())
      arguments.problem("--resume continues a run from its own weights; drop --init_from " +
                        init_from + ", or start a new run with it in another --out_dir");
    state = load_training_state(training_state_path(resume_dir));
    if (state->world_size > 0 && state->world_size != world_size)
      arguments.problem(other_world_size(*state, world_size, resume_dir));
    config = state->config;
    config.out_dir = resume_dir;
    const Config before = config;
    given = arguments.apply_config_keys(config, kTrainOptions, "train");
    for (const ConfigKey* key : kept_keys_that_differ(before, config))
      arguments.problem(std::string("--resume continues a run exactly, so --") + key->name +
                        " cannot change; start a new run with --init_from " + resume_dir +
                        "/ckpt.safetensors instead");
    // It replaces only another run in the folder a resume moves to (--out_dir B).
    if (overwrite && config.out_dir == resume_dir)
      arguments.problem("--overwrite does nothing with --resume " + resume_dir +
                        ", which continues the run in its own folder: drop it (to start that "
                        "run again, leave out --resume)");
  } else {
    // --init_from without --config starts from the weights' own config (structure, recipe, run),
    // as nanoGPT's init_from='gpt2' takes the model's arguments from it; flags override it.
    // (An unreadable --init_from is a failure, exit 1, not a usage problem.)
    const std::optional<std::string> config_name = arguments.take("config");
    if (!config_name && !init_from.empty())
      config = config_of_initial_weights(init_from, load_config("shakespeare_char"));
    else
      arguments.collect(
          [&] { config = load_config(config_name.value_or("shakespeare_char"), &user_keys); });
    given = arguments.apply_config_keys(config, kTrainOptions, "train");
  }
  arguments.finish("train", kTrainOptions, false,
                   "options are written --key=value (the text is --data FILE)");
  apply_sagemaker_channels(config, env);
  arguments.collect([&] { validate_config(config); });
  arguments.collect([&] { train_fraction_given(given, config.data); });
  user_keys.insert(user_keys.end(), given.begin(), given.end());
  arguments.collect([&] { refuse_unused_schedule_keys(config, user_keys); });
  arguments.throw_problems();
  if (print_config) {
    std::cout << config_to_text(config);
    return 0;
  }
  if (state && state->steps_done >= config.max_iters) {
    if (env.rank == 0) std::cout << nothing_left_to_train(*state, config, resume_dir);
    return 0;
  }
  const std::string data_path = resolve_data_path(config.data);
  if (ranks_to_start > 1) {
    state.reset();  // the ranks read it again: the launcher holds no copy while they train
    // The ranks are copies of this command without --nproc (the default text fetched once,
    // above, not by each at the same time).
    return run_local_ranks(ranks_to_start, arguments.original_without("nproc"));
  }

  TaskProgress preparing("preparing " + data_path, 1, "", StatusLine::standard_output(),
                         !quiet && env.rank == 0);
  // The model's tokenizer reads the text unless --tokenizer names another: a resumed run's, or
  // that of the weights a run starts from (a BPE model finetuned on a plain text file).
  std::optional<Tokenizer> init_tokenizer;
  if (!init_from.empty() && config.tokenizer.empty())
    init_tokenizer = tokenizer_of_initial_weights(init_from);
  const Tokenizer* model_tokenizer =
      state ? &state->tokenizer : init_tokenizer ? &*init_tokenizer : nullptr;
  const Dataset data = load_dataset(
      data_path, config.train_fraction, config.tokenizer, model_tokenizer,
      state ? "the resumed run in " + resume_dir : "--init_from " + init_from,
      [&](double fraction) { preparing.set_done(fraction); });
  preparing.finish();
  check_dataset_fits(data, config.block_size);
  if (data.tokenizer().size() == 1 && env.rank == 0)
    std::fprintf(stderr,
                 "folio: warning: %s holds only one distinct character, so there is "
                 "nothing to learn: the model will predict it every time and the loss fall to 0; "
                 "train on a text with more than one character\n",
                 data_path.c_str());
  // GPT-2's recipe (the gpt2 presets) pads a 50257-token vocabulary: on a text without
  // --tokenizer it would quietly train GPT-2's model on the text's characters.
  if (data.text() != nullptr && config.vocab_padding > 1 && !state && init_from.empty() &&
      env.rank == 0)
    std::fprintf(stderr,
                 "folio: note: this config pads the vocabulary (vocab_padding = %d), as GPT-2's "
                 "recipe does, and %s is trained on its %d characters; for GPT-2's tokens pass "
                 "--tokenizer gpt2\n",
                 config.vocab_padding, data_path.c_str(), data.tokenizer().size());
  if (state && data.identity() != state->data_sha256)
    throw Error("the data in " + data_path + " differs from the data the resumed run trained on " +
                "(identity " + data.identity().substr(0, 12) + "... vs " +
                state->data_sha256.substr(0, 12) + "...): pass --data with the original " +
                (data.is_token_folder() ? "folder" : "file"));

  BackendOptions backend_options;
  backend_options.dtype = config.dtype;
  backend_options.tf32 = config.tf32;
  backend_options.device_index = env.local_rank;  // one GPU per rank of this machine
  std::unique_ptr<Backend> backend =
      make_backend(config.device, threads_for_rank(config.threads), backend_options);
  std::unique_ptr<Communicator> communicator =
      make_communicator(env, config.dist_timeout, *backend);
  install_stop_handlers(config.out_dir);
  if (state) note_state_saved(state->steps_done);
  TrainOptions options;
  options.init_from = init_from;
  options.resume = state ? &*state : nullptr;
  options.resume_dir = resume_dir;
  options.launcher = env.launcher_name();
  options.overwrite = overwrite;
  options.quiet = quiet;
  try {
    train(config, data, *backend, *communicator, options);
  } catch (const Error& error) {
    // With several ranks, say which one failed (unless the message already does).
    const std::string message = error.what();
    if (communicator->world_size() > 1 && message.rfind("rank ", 0) != 0)
      throw Error("rank " + std::to_string(communicator->rank()) + ": " + message);
    throw;
  }
  return 0;
}

}  // namespace folio
