"""The built-in, non-LLM proposer: expert templates, launch-config search and algebraic rewrites."""
