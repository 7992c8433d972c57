"""The built-in, non-LLM proposer: mechanical launch-configuration variants of Inductor kernels."""
