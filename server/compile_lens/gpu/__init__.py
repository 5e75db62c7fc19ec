"""Whether other processes are using the GPU the measurements run on, so that background
measurements on a shared GPU box wait for them: `busy` decides (pure), `readers` reads NVML
(when `nvidia-ml-py` is installed), `wait` waits. The server process and the CLI use it; torch never."""
