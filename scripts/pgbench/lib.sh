# Shared by scripts/pgbench/run and scripts/pgloadbench (source it; bash).
#
# OKE_BENCH_PG is the server, without a database: postgres://user@host:port
# (default postgres://postgres@127.0.0.1:5432, what scripts/pg starts). The
# user must be allowed to create databases. Every database made here is
# called oke_bench_<name>_<pid of the script>, and dropped by pgb_cleanup.

OKE_BENCH_PG="${OKE_BENCH_PG:-postgres://postgres@127.0.0.1:5432}"
pgb_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# pgb_expand SCRIPT writes scripts/pgbench/SCRIPT to a temporary file with
# every "--@include NAME" line replaced by parts/NAME (pgbench has no
# include), and prints the file's name; the caller removes it. The parts
# hold what the scripts share: the driver's claim, a fresh key, the charge
# and its completion.
pgb_expand() {
	local f
	f=$(mktemp --suffix=.sql)
	awk -v dir="$pgb_dir/parts" '/^--@include / { p = dir "/" $2; while ((getline l < p) > 0) print l; close(p); next } { print }' \
		"$pgb_dir/$1" >"$f"
	echo "$f"
}

pgb_say() { echo "$(basename "$0"): $*" >&2; }

# pgb_bindir prints the directory of the server's client tools (pgbench is
# in postgresql-contrib on Debian up to 9.x, in postgresql-client since 10,
# and always in /usr/lib/postgresql/*/bin).
pgb_bindir() {
	local d
	if command -v pgbench >/dev/null 2>&1; then dirname "$(command -v pgbench)"; return 0; fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		[ -x "$d/pgbench" ] && { echo "$d"; return 0; }
	done
	return 1
}

# pgb_need checks for the tools, installing them with apt-get when root.
# Usage: pgb_need pgbench psql wrk
pgb_need() {
	local t missing=()
	for t in "$@"; do
		case $t in
		pgbench | psql) PATH="$PATH:$(pgb_bindir || true)" command -v "$t" >/dev/null 2>&1 || missing+=("$t") ;;
		*) command -v "$t" >/dev/null 2>&1 || missing+=("$t") ;;
		esac
	done
	[ ${#missing[@]} -eq 0 ] && { PATH="$PATH:$(pgb_bindir || true)"; return 0; }
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		local pkgs=()
		for t in "${missing[@]}"; do
			case $t in
			pgbench | psql) pkgs+=(postgresql-client postgresql-contrib) ;;
			*) pkgs+=("$t") ;;
			esac
		done
		pgb_say "installing ${pkgs[*]} (missing: ${missing[*]})"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >&2
		PATH="$PATH:$(pgb_bindir || true)"
		for t in "${missing[@]}"; do command -v "$t" >/dev/null 2>&1 || { pgb_say "$t still missing"; exit 1; }; done
		return 0
	fi
	pgb_say "missing ${missing[*]}: install them (Debian: apt-get install postgresql-client postgresql-contrib wrk)"
	exit 1
}

# pgb_psql runs psql on database $1 with the rest of the arguments.
pgb_psql() { local db=$1; shift; psql "$OKE_BENCH_PG/$db?sslmode=disable" -X -v ON_ERROR_STOP=1 -qAt "$@"; }

# pgb_createdb creates a fresh database oke_bench_<$1>_<pid> and prints its
# name ($$ is the script's pid, also in the subshell of db=$(pgb_createdb x)).
pgb_createdb() {
	local db="oke_bench_$1_$$"
	pgb_psql postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >&2
	echo "$db"
}

# pgb_cleanup drops the databases pgb_createdb made in this script (call it
# from a trap).
pgb_cleanup() {
	local db
	for db in $(pgb_psql postgres -c "SELECT datname FROM pg_database WHERE datname ~ '^oke_bench_[a-z0-9]+_$$\$'" 2>/dev/null); do
		pgb_psql postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
	done
}

# pgb_migrate db demo-binary: creates oke's tables (schema oke) and the
# demo's business tables (public) in db by starting the demo once on it:
# the driver's own Migrate and the demo's schema, not a copy of them.
pgb_migrate() {
	local db=$1 bin=$2 log pid
	log=$(mktemp)
	"$bin" -addr 127.0.0.1:0 -postgres "$OKE_BENCH_PG/$db?sslmode=disable" 2>"$log" &
	pid=$!
	for _ in $(seq 200); do
		grep -q "listening on" "$log" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	grep -q "listening on" "$log" || { pgb_say "the demo did not start on $db:"; cat "$log" >&2; rm -f "$log"; exit 1; }
	rm -f "$log"
	pgb_psql "$db" -c "SELECT 1 FROM oke.oke_idempotency LIMIT 0" -c "SELECT 1 FROM charges LIMIT 0" >/dev/null
}

# pgb_fp is a fingerprint-shaped value (64 hex digits, as oke's SHA-256).
pgb_fp=$(printf 'payments.charge {"amount":1000,"currency":"usd"}' | sha256sum | cut -c1-64)

# pgb_run db script duration clients run-id: runs pgbench with one of the
# scripts in scripts/pgbench on db and prints "tps latency_avg_ms transactions".
# duration is in seconds. The keys are unique across calls with distinct
# run ids (1 to 9 000 000; 0 is the replay key's).
pgb_run() {
	local db=$1 script=$2 dur=$3 clients=$4 run=$5
	local out f
	f=$(pgb_expand "$script")
	out=$(pgbench "$OKE_BENCH_PG/$db?sslmode=disable" -n -M prepared -c "$clients" -j 2 -T "$dur" \
		-D run="$run" -D n=0 -D fp="$pgb_fp" -D lease=30000000 -D ttl=86400000000 \
		-D tenant=default -D principal=anon -D flow=payments.charge \
		-f "$f" 2>&1) || { rm -f "$f"; echo "$out" >&2; return 1; }
	rm -f "$f"
	local tps lat n failed
	tps=$(awk '/^tps = / {print $3}' <<<"$out")
	lat=$(awk '/^latency average = / {print $4}' <<<"$out")
	n=$(awk '/^number of transactions actually processed: / {print $6}' <<<"$out" | cut -d/ -f1)
	failed=$(awk '/^number of failed transactions: / {print $5}' <<<"$out")
	if [ -z "$tps" ] || { [ -n "$failed" ] && [ "$failed" != 0 ]; }; then
		echo "$out" >&2
		return 1
	fi
	echo "$tps $lat $n"
}

# pgb_check_completed db: fails unless every claimed row was completed and
# there is one charge per completed row (pgbench does not check that the
# fenced UPDATE found its row; this does).
pgb_check_completed() {
	local db=$1 running completed charges
	read -r running completed charges < <(pgb_psql "$db" -F ' ' -c \
		"SELECT (SELECT count(*) FROM oke.oke_idempotency WHERE state = 1),
		        (SELECT count(*) FROM oke.oke_idempotency WHERE state = 2),
		        (SELECT count(*) FROM charges)")
	if [ "$running" != 0 ] || [ "$completed" != "$charges" ]; then
		pgb_say "check failed on $db: $running rows still running, $completed completed, $charges charges"
		return 1
	fi
}
