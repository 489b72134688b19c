"""The agent runtime (middleware contract, run context, usage, effects journal, model clients).

Built in the runtime issue; it will know nothing of memory.
"""
