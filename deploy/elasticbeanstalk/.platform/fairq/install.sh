#!/bin/bash
# Replaces aws-sqsd with `fairq worker` on an Elastic Beanstalk worker
# instance (Amazon Linux 2 or 2023). Run by the postdeploy platform hooks
# after every application and configuration deployment:
#
#   1. writes /etc/fairq/fairq.env: the environment's aws:elasticbeanstalk:sqsd
#      options as fairq's worker.* keys (FAIRQ_WORKER_*), then every
#      environment property whose name starts with FAIRQ_;
#   2. installs the fairq binary, fairq.yaml and the sandboxed systemd unit
#      shipped beside this script;
#   3. stops and disables aws-sqsd, and (re)starts fairq-worker.
#
# With --env-only FILE it only writes step 1 to FILE. The option settings
# and environment properties are read with the platform's get-config, or
# from the JSON files named by FAIRQ_EB_OPTIONSETTINGS and
# FAIRQ_EB_ENVIRONMENT (as `get-config optionsettings` and `get-config
# environment` print them).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
get_config=/opt/elasticbeanstalk/bin/get-config

# json WHAT: the platform's JSON for WHAT (optionsettings or environment).
json() {
	local override
	case $1 in
	optionsettings) override=${FAIRQ_EB_OPTIONSETTINGS:-} ;;
	environment) override=${FAIRQ_EB_ENVIRONMENT:-} ;;
	esac
	if [[ -n $override ]]; then
		cat -- "$override"
	else
		"$get_config" "$1"
	fi
}

# quote VALUE: VALUE as a double-quoted systemd EnvironmentFile value, with
# the characters systemd escapes there (\ " ` $) escaped.
quote() {
	local v=${1//\\/\\\\}
	v=${v//\"/\\\"}
	v=${v//\`/\\\`}
	v=${v//\$/\\\$}
	printf '"%s"' "$v"
}

# seconds NAME VALUE: an aws-sqsd number of seconds as a Go duration.
seconds() {
	if [[ ! $2 =~ ^[0-9]+$ ]]; then
		echo "fairq: aws:elasticbeanstalk:sqsd $1 is '$2', not a number of seconds" >&2
		exit 1
	fi
	printf '%ss' "$2"
}

# write_env FILE: the worker's environment, as an EnvironmentFile.
write_env() {
	local opts env path v
	opts=$(json optionsettings)
	env=$(json environment)
	sqsd() { jq -r --arg o "$1" '."aws:elasticbeanstalk:sqsd"[$o] // empty' <<<"$opts"; }
	{
		echo "# Written by the fairq Elastic Beanstalk hook at each deployment: do not edit."
		echo "# aws:elasticbeanstalk:sqsd options, as fairq's worker.* keys:"
		# aws-sqsd posts to the application through the platform's proxy on
		# port 80; so does fairq.
		path=$(sqsd HttpPath)
		path=${path:-/}
		[[ $path == /* ]] || path=/$path
		echo "FAIRQ_WORKER_PUSH_URL=$(quote "http://127.0.0.1:80$path")"
		while read -r option key kind; do
			v=$(sqsd "$option")
			[[ -n $v ]] || continue
			if [[ $kind == seconds ]]; then
				v=$(seconds "$option" "$v")
			fi
			echo "$key=$(quote "$v")"
		done <<-'MAP'
			MimeType FAIRQ_WORKER_MIME_TYPE text
			HttpConnections FAIRQ_WORKER_CONNECTIONS text
			ConnectTimeout FAIRQ_WORKER_CONNECT_TIMEOUT seconds
			InactivityTimeout FAIRQ_WORKER_INACTIVITY_TIMEOUT seconds
			VisibilityTimeout FAIRQ_WORKER_VISIBILITY_TIMEOUT seconds
			ErrorVisibilityTimeout FAIRQ_WORKER_ERROR_VISIBILITY_TIMEOUT seconds
			MaxRetries FAIRQ_WORKER_MAX_RETRIES text
		MAP
		# RetentionPeriod belongs to the queues (fairq queues create, or the
		# Terraform module's message_retention_seconds); WorkerQueueURL is
		# not used: fairq reads its own queues (sqs.queue_prefix).
		echo "# Environment properties named FAIRQ_*:"
		jq -r 'to_entries[] | select(.key | test("^FAIRQ_[A-Z0-9_]+$")) | "\(.key)\t\(.value)"' <<<"$env" |
			while IFS=$'\t' read -r name value; do
				echo "$name=$(quote "$value")"
			done
	} >"$1"
}

if [[ ${1:-} == --env-only ]]; then
	write_env "${2:?usage: install.sh --env-only FILE}"
	exit 0
fi

install -d -m 0755 /etc/fairq
tmp=$(mktemp /etc/fairq/.fairq.env.XXXXXX)
write_env "$tmp"
chmod 0600 "$tmp"
mv -f "$tmp" /etc/fairq/fairq.env

arch=$(uname -m)
case $arch in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
esac
install -m 0755 "$here/fairq_linux_$arch" /usr/local/bin/fairq
install -m 0644 "$here/fairq.yaml" /etc/fairq/fairq.yaml
install -m 0644 "$here/fairq-worker.service" /etc/systemd/system/fairq-worker.service
systemctl daemon-reload

for unit in sqsd aws-sqsd; do
	if systemctl list-unit-files --no-legend "$unit.service" | grep -q .; then
		systemctl disable --now "$unit.service"
	fi
done
systemctl enable fairq-worker.service
systemctl restart fairq-worker.service
