"""kiroctl's commands, one module per family."""
