#!/usr/bin/env bash
# The managed Redis's users, for `redis-server --aclfile DIR/users.acl`:
#
#   seckill-node    data plane nodes and order workers: the commands they use on the
#                   keys they write (partitions, tickets, codes, the blacklist, the fleet's
#                   records, unmatched payments, the shop's webhooks); campaigns and limits read-only; and
#                   INFO, by which a payment learns whether its master has replicas to
#                   wait for
#   seckill-ops     the operators' CLI, console and simulator: the whole control plane
#   seckill-admin   maintenance (shutdown, replication, DEBUG): never used by a program
#   default         off: a client that does not log in gets nothing (its rules allow all
#                   because Redis 7.0 replays the append-only file's transactions as the
#                   default user; being off, nobody can log in as it)
#
# Neither program user may run FLUSHALL, FLUSHDB, CONFIG, DEBUG, KEYS, SCRIPT FLUSH,
# FUNCTION, SHUTDOWN or any other command of Redis's @dangerous category (INFO aside,
# for the nodes).
# Each password is created on first use into DIR/<user>.password, readable by its owner
# only (mode 0600 from the start), and kept: running this again rewrites the ACL file
# from the same passwords. DIR/replication.conf (mode 0600) is a redis-server config
# file by which a replica logs in to its master as seckill-admin: given as the config
# file, it keeps the password out of the process list.
#
#   scripts/redis-users.sh DIR
set -euo pipefail
dir=${1:?usage: $0 DIR}
mkdir -p "$dir"
umask 077
for who in node ops admin; do
  f="$dir/$who.password"
  if [ ! -s "$f" ]; then
    head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '\n' > "$f.new"
    mv "$f.new" "$f"
  fi
done
hash() { tr -d '\n' < "$dir/$1.password" | sha256sum | cut -d' ' -f1; }
limited="+@all -@dangerous -script|flush -script|kill -function"
{
  echo "user default off resetpass ~* &* +@all"
  echo "user seckill-admin on #$(hash admin) ~* &* +@all"
  echo "user seckill-ops on #$(hash ops) ~sk:* &sk:* $limited"
  echo "user seckill-node on #$(hash node) ~sk:{* ~sk:blacklist ~sk:blacklist:version ~sk:fleet ~sk:node:* ~sk:worker:* ~sk:payments:* ~sk:shop:* %R~sk:* &sk:* $limited +info"
} > "$dir/users.acl.new"
mv "$dir/users.acl.new" "$dir/users.acl"
printf 'masteruser seckill-admin\nmasterauth %s\n' "$(tr -d '\n' < "$dir/admin.password")" > "$dir/replication.conf.new"
mv "$dir/replication.conf.new" "$dir/replication.conf"
