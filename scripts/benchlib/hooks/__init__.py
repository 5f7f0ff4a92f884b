"""scripts/bench_hooks.py: ``timed_addons`` (the script its mitmdump loads:
obsmask's addons with every hook timed). The names below are shared by the
two sides: the file the times go to, and what is timed besides the hooks."""

# The environment variable naming the file mitmdump writes the times to.
OUT_VARIABLE = "OBSMASK_BENCH_HOOKS_OUT"
# Timed pieces that are not hooks, named as the report names them: the copy
# of what the client sent, obsmask's log records handled in a flow's hooks
# and those handled after them (each summed per flow), and the masking time
# the flow's summary records.
BACKUP = "flow.backup()"
LOG_RECORDS = "log records"
LOG_RECORD_COUNT = "log records (count)"
LATER_LOG_RECORDS = "log records after the hooks"
LATER_LOG_RECORD_COUNT = "log records after the hooks (count)"
MASK = "masking (the summary's mask_ms)"
