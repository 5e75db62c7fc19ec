"""Is the machine busy? One rule for every asker, on every box: `rule` decides (pure: `decide`, CPU or
CUDA, schedstat or not, NVML or not, our own processes told apart from others', and its words);
`cpu` reads others' and our own CPU (psutil), our launching thread's wait for a core (schedstat)
and the load average; `gpu` reads who holds the GPU (NVML when `nvidia-ml-py` is installed, or a
readings file); `contention` reads a timing's span or round with them and asks the rule (the
worker's timing, the levers, the line costs); `wait` holds background measurements while another
process uses the GPU (the server and the CLI). The trial's runs, the levers' compile sides and a
stored reading (`busy_words`) ask `rule` too. Never torch: the server process imports it."""
