#!/usr/bin/env node
// The `sparq` command (see `sparq --help`).
import '@sparq/cli';
