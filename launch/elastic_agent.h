// An elastic job: this machine's launcher meets the others at the rendezvous endpoint
// (serving the rendezvous store when the endpoint is this host and nobody serves it yet),
// and for each round the launchers agree on runs this machine's ranks as one attempt.
//
// A round ends when a rank fails anywhere, a member's launcher goes away (heartbeats), or a
// machine waits to join while there is room; every launcher then stops its ranks and joins
// the next round with whoever is there, as long as --nnodes MIN come. A failure or a
// machine gone counts a restart (the job's count, agreed in the store); a machine joining
// does not, nor one removed on purpose (a Ctrl-C at its launcher's terminal: round_end.h).
// The machine whose launcher serves the rendezvous store cannot leave alone (the store ends
// with it): a stopping signal there, a Ctrl-C too, stops the job on every machine
// (Rendezvous::stop_job), each other launcher ending with one line that names that stop.
// When every member's ranks have finished, the job is done.
//
// Each round: "launch: rendezvous 'job7' round 2: 2 machines (min 1, max 4)"; each end:
// "launch: rendezvous 'job7' round 1 ended: <why>; restart 1 of 3".
#pragma once

#include "launch/attempt.h"
#include "launch/elastic_options.h"
#include "launch/launch_options.h"

namespace distcomm {
namespace launch {

// Throws std::invalid_argument for bad options (naming the flag) and std::runtime_error
// when the rendezvous cannot be reached or formed; no rank is left running in either case.
JobResult run_elastic_job(const LaunchOptions& options, const ElasticOptions& elastic);

// The checks of run_elastic_job's options, before anything starts.
void validate_elastic(const LaunchOptions& options, const ElasticOptions& elastic);

}  // namespace launch
}  // namespace distcomm
