// folio train [--config NAME|FILE] [--data FILE] [--out_dir DIR] [--init_from CKPT] [--key=value]
#include <iostream>
#include <sstream>

#include "backend/backend.h"
#include "cli/commands.h"
#include "config/presets.h"
#include "core/error.h"
#include "data/fetch.h"
#include "data/text_dataset.h"
#include "train/trainer.h"

namespace folio {

std::string config_keys_help() {
  std::ostringstream out;
  const Config defaults;
  std::string group;
  for (const ConfigKey& key : config_keys()) {
    if (group != key.group) {
      group = key.group;
      out << "\n  " << group << ":\n";
    }
    std::string value = get_config_value(defaults, key);
    if (value.empty()) value = "\"\"";
    std::string head = std::string("    --") + key.name + " (" + config_key_type(key) + ", " +
                       value + ")";
    out << head << "\n        " << key.help << "\n";
  }
  return out.str();
}

int train_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout << "usage: folio train [--config NAME|FILE] [--data FILE] [--out_dir DIR] "
                 "[--init_from CKPT] [--KEY=VALUE ...]\n\n"
                 "Trains a GPT on a UTF-8 text file. --config names a preset ("
              << preset_names()
              << "; default shakespeare_char) or a file of `key = value` lines;\n"
                 "each --KEY=VALUE then overrides one config key. --init_from starts from the "
                 "weights of a checkpoint instead of a fresh init.\n\nconfig keys (type, default "
                 "of shakespeare_char):"
              << config_keys_help();
    return 0;
  }
  const std::string config_name = arguments.take("config").value_or("shakespeare_char");
  const std::string init_from = arguments.take("init_from").value_or("");
  Config config = load_config(config_name);
  arguments.apply_config_keys(config, {"config", "init_from", "help"});
  if (!arguments.positionals().empty())
    throw UsageError("unexpected argument '" + arguments.positionals().front() +
                     "': options are written --key=value");
  validate_config(config);

  const std::string data_path = resolve_data_path(config.data);
  const TextDataset data = load_text_dataset(data_path, config.train_fraction);
  check_dataset_fits(data, config.block_size);
  std::unique_ptr<Backend> backend = make_backend(config.device, config.threads);
  train(config, data, *backend, init_from);
  return 0;
}

}  // namespace folio
