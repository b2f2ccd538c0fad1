// folio info CKPT [--json] [--data FILE]: what a checkpoint holds, as text or one JSON object.
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/checkpoint_session.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/sha256.h"
#include "data/text_dataset.h"
#include "io/checkpoint_summary.h"
#include "io/safetensors.h"

namespace folio {

int info_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout << "usage: folio info CKPT [--json] [--data FILE]\n\n"
                 "Describes a checkpoint: file size and sha256, the step and losses it was "
                 "saved at, the preset it matches,\nthe model's structure, its parameters by "
                 "tensor group, the tokenizer (characters or byte-level BPE) and the full config; "
                 "--json prints\nall of it as "
                 "one JSON object. --data (and config keys such as --activation) are needed only "
                 "for files\nwritten by PyTorch, which carry no vocabulary or config.\n";
    return 0;
  }
  const bool as_json = arguments.take_flag("json");
  std::optional<std::string> path = arguments.take("ckpt");
  Config base;
  const std::vector<std::string> info_options = {"ckpt", "json", "help"};
  const std::vector<std::string> given = arguments.apply_config_keys(base, info_options, "info");
  const std::vector<std::string>& positionals = arguments.positionals();
  for (size_t i = 0; i < positionals.size(); ++i) {
    if (!path)
      path = positionals[i];
    else
      arguments.problem("folio info takes one checkpoint; '" + positionals[i] + "' is another");
  }
  if (!path) arguments.problem("folio info needs a checkpoint: folio info out/ckpt.safetensors");
  arguments.finish("info", info_options, /*positionals_allowed=*/true);

  // The file is read twice (its values, then its sha256): a pipe would be empty the second time
  // (it printed the sha256 of nothing).
  std::error_code error;
  if (std::filesystem::exists(*path, error) && !std::filesystem::is_regular_file(*path, error) &&
      !std::filesystem::is_directory(*path, error))
    throw Error("folio info reads " + *path +
                " twice (its values, then the whole file's sha256), which a pipe or device "
                "cannot give: save it to a file first");
  std::optional<TextDataset> data;
  if (!base.data.empty()) data = load_text_dataset(base.data, base.train_fraction);
  LoadedCheckpoint checkpoint = load_checkpoint(*path, base, data ? &data->vocabulary : nullptr);
  check_keys_for_checkpoint(given, base, checkpoint, "info", {"train_fraction"});
  // Every value is read and checked (the data checksum, finite, a tied head equal to the
  // embedding), none kept.
  checkpoint.parameters->write([](size_t, const float*, size_t) {});
  // A file from elsewhere records no data checksum: show the one of its tensors as stored.
  if (checkpoint.data_sha256.empty())
    checkpoint.data_sha256 = SafetensorsFile::read(*path, DataCheck::kInOnePass).data_sha256();
  const CheckpointSummary summary{checkpoint, sha256_file_hex(*path)};
  if (as_json) std::cout << summary_json(summary).dump(2) << "\n";
  else std::cout << summary_text(summary);
  return 0;
}

}  // namespace folio
