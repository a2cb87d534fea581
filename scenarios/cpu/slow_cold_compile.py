"""A healthy model whose first compile in an Inductor cache outlasts the run's limit, and whose later compiles in that
cache do not: a large model's cold compile against --timeout. Nothing hangs and every run that gets past its compile
passes, so aoti-bisect must not read the stopped run as a reproduced hang.

The cold cost stands in for a large model's kernels built for the first time: a post-grad pass that, the first time
it sees this cache folder, marks it and then waits far past the scenario's limit. The run is stopped inside
aoti_compile_and_package, as a slow compile is."""
import os
import time

import torch
from torch._inductor import config
from torch._inductor.custom_graph_pass import CustomGraphPass
from torch._inductor.runtime.cache_dir_utils import cache_dir


class ColdCache(CustomGraphPass):
    def __call__(self, graph):
        marker = os.path.join(cache_dir(), "slow_cold_compile.warm")
        if not os.path.exists(marker):
            os.makedirs(cache_dir(), exist_ok=True)
            open(marker, "w").close()
            time.sleep(3600)

    def uuid(self):
        return "slow_cold_compile"


class M(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 3 - 1


config.post_grad_custom_post_pass = ColdCache()
torch.manual_seed(0)
x = torch.randn(32, 64)
ep = torch.export.export(M(), (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("slow_cold_compile.pt2"))
runner = torch._inductor.aoti_load_package(path)
torch.testing.assert_close(runner(x), M()(x))
print("ok")
