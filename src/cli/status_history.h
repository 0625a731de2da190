// cli/status_history.h — `baton status --history LOCK` without --from: the
// history batond recorded for one lock, asked of batond itself over its
// lock protocol (LOCK.HISTORY) on the --store baton:// URL. With --from, the
// history comes from a page server (status_serve.h, print_history).
#ifndef BATON_CLI_STATUS_HISTORY_H_
#define BATON_CLI_STATUS_HISTORY_H_

#include <string>

#include "cli/cli.h"

namespace baton::cli {

// Prints the history of `lock` that the --store batond recorded; an exit
// code (invalid_argument naming --from for a store other than batond).
int print_store_history(const Globals& globals, const std::string& lock,
                        bool json);

}  // namespace baton::cli

#endif  // BATON_CLI_STATUS_HISTORY_H_
