// `folio train --nproc N`: this process becomes a small launcher (as the seed's mp.spawn script
// does), starting N copies of folio as the ranks of one job on this machine with a
// torchrun-style environment, so that no launcher needs installing.
#pragma once

#include <string>
#include <vector>

namespace folio {

// Runs `arguments` (argv without the program name and without --nproc) as `count` ranks. Each
// rank takes its share of the cores unless the arguments set --threads (cli/thread_budget.h reads
// the environment set here: an argument added here would be saved in the run's config, and a
// resume elsewhere would inherit it). Forwards SIGINT and SIGTERM to the ranks; when one rank
// fails, stops the others. Returns the exit code for this process: 0 when every rank succeeded.
int run_local_ranks(int count, const std::vector<std::string>& arguments);

}  // namespace folio
