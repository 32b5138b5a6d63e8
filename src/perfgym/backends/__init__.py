"""One module per kernel language; each turns (task, code, size, config) into measurements."""
