#!/bin/bash
# Runs fairq's worker in place of aws-sqsd (see .platform/fairq/install.sh).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../../fairq/install.sh"
