#!/bin/sh
# Makes what the compose `secure` profile mounts, into deploy/secure/generated/ (or the directory given):
# a throwaway CA (ca.pem), kcoord's key and certificate chain in one PEM file (server.pem, for
# ssl.keystore.location), and random passwords for the Kafka client user `app` (app.password) and
# for Prometheus's Basic auth user `prometheus` (prometheus.password). The compose service
# kcoord-users turns the passwords into SCRAM users with `kcoord users add`. Nothing here is
# committed: run it once before `docker compose --profile secure up --build`.
set -eu
out="${1:-$(dirname "$0")/generated}"
mkdir -p "$out"
chmod 0755 "$out"
cd "$out"
if [ -e server.pem ]; then
    echo "kept existing certificates in $out (remove the directory to make new ones)"
    exit 0
fi
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 825 \
    -subj "/CN=kcoord compose CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
printf 'subjectAltName=DNS:kcoord-secure,DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
openssl req -new -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=kcoord-secure" 2>/dev/null
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt \
    -days 825 -sha256 -extfile server.ext 2>/dev/null
cat server.key server.crt > server.pem
rm -f ca.key ca.srl server.csr server.ext server.key server.crt
openssl rand -hex 24 | tr -d '\n' > app.password
openssl rand -hex 24 | tr -d '\n' > prometheus.password
# The containers run as uid 10001 (kcoord) and 65534 (Prometheus): they must read what they mount.
chmod 0644 ca.pem server.pem app.password prometheus.password
echo "wrote ca.pem, server.pem, app.password, prometheus.password to $out"
