"""The LLM agents (planner, executor with retry-fix, summarizer), split by concern.

prompts      named prompt templates (text only)
parsing      pure functions: reply text -> typed values, junk rejected explicitly
result_text  profiles, gate verdicts and outcomes rendered for prompts
transport    the AsyncOpenAI client (max_retries=0) and failure classification
ledger       token / cost accounting
roles        one async function per role: prompt -> call -> parse -> store
messages     the chat messages of each role (shared with `kernelopt prompt`)
sections     fact sections: signature table, numbers, hardware, numerics, contract form
facts        PromptFacts from contracts only (workflow-safe): Amdahl, bytes floor;
             with_context (activities, CLI): versions, chosen config, neighbours
budget       token estimates (chars / 4) and deliberate cuts per role budget
plans        dropping duplicate plans before code is written
"""
