#!/bin/sh
# Run by the compose service kcoord-secrets (as root, once per `up`): copies what setup.sh made (SOURCE,
# mounted read-only) into one directory per reader, each file owned by the container user that reads
# it and readable by that user only. Each service then mounts only its own directory:
#   KCOORD_TLS   kcoord-secure        server.pem (the TLS key), ca.pem (for its healthcheck)
#   USERS        kcoord-users         admin, app and prometheus passwords (to make the SCRAM users)
#   ADMIN        kcoord-acls          admin.properties (the super user's login) and ca.pem
#   PROMETHEUS   prometheus-secure    prometheus.password (HTTP Basic) and ca.pem
# Usage: install-secrets.sh SOURCE KCOORD_TLS USERS ADMIN PROMETHEUS
# KCOORD_UID (10001, the image's USER) and PROMETHEUS_UID (65534, nobody in prom/prometheus) override.
set -eu
[ $# -eq 5 ] || { echo "usage: $0 SOURCE KCOORD_TLS USERS ADMIN PROMETHEUS" >&2; exit 2; }
source_dir=$1 tls=$2 users=$3 admin=$4 prometheus=$5
kcoord_uid=${KCOORD_UID:-10001}
prometheus_uid=${PROMETHEUS_UID:-65534}
for name in ca.pem server.pem admin.password app.password prometheus.password; do
    [ -s "$source_dir/$name" ] || { echo "$source_dir/$name is missing: run deploy/secure/setup.sh first" >&2; exit 1; }
done
private() {  # private UID FILE DIRECTORY: a copy only UID can read
    install -o "$1" -g "$1" -m 0600 "$2" "$3/$(basename "$2")"
}
public() {  # public UID FILE DIRECTORY: a certificate anyone may read
    install -o "$1" -g "$1" -m 0644 "$2" "$3/$(basename "$2")"
}
for dir in "$tls" "$users" "$admin"; do
    install -d -o "$kcoord_uid" -g "$kcoord_uid" -m 0700 "$dir"
done
install -d -o "$prometheus_uid" -g "$prometheus_uid" -m 0700 "$prometheus"
private "$kcoord_uid" "$source_dir/server.pem" "$tls"
public "$kcoord_uid" "$source_dir/ca.pem" "$tls"
for user in admin app prometheus; do
    private "$kcoord_uid" "$source_dir/$user.password" "$users"
done
public "$kcoord_uid" "$source_dir/ca.pem" "$admin"
umask 077
{
    echo "security.protocol=SASL_SSL"
    echo "sasl.mechanism=SCRAM-SHA-512"
    echo "sasl.username=admin"
    echo "sasl.password=$(cat "$source_dir/admin.password")"
    echo "ssl.ca.location=$admin/ca.pem"
} > "$admin/admin.properties"
chown "$kcoord_uid:$kcoord_uid" "$admin/admin.properties"
chmod 0600 "$admin/admin.properties"
private "$prometheus_uid" "$source_dir/prometheus.password" "$prometheus"
public "$prometheus_uid" "$source_dir/ca.pem" "$prometheus"
echo "installed the secure profile's files for uid $kcoord_uid (kcoord) and uid $prometheus_uid (Prometheus)"
