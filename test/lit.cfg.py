# -*- Python -*- lit configuration for gptc.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "gptc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.gptc_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "fixtures", "Inputs"]

# `not` and `count` at the start of a RUN line come from the LLVM tools dir.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(
    ["gpt-opt", "gptc", "gptrun", "gpt-data", "gptplot"],
    [config.gptc_tools_dir, config.llvm_tools_dir])
config.substitutions.append(("%models", os.path.join(config.gptc_src_root, "models")))
