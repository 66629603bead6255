// Picking a port for the store that every rank of a one-machine job can agree on.
#pragma once

namespace distcomm {
namespace launch {

// Binds a TCP socket to port 0 on all interfaces, reads the port the kernel chose and
// closes it. The port is free now; rank 0 binds it moments later (the same small race
// every launcher that hands out a port accepts). Throws std::runtime_error on failure.
int pick_free_port();

}  // namespace launch
}  // namespace distcomm
