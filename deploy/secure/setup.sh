#!/bin/sh
# Makes what the compose `secure` profile needs, into deploy/secure/generated/ (or the directory given),
# readable by you only (directory 0700, keys and passwords 0600; ca.pem, a public certificate, 0644):
#   ca.pem               a throwaway CA (its key is deleted once the server certificate is signed)
#   server.pem           kcoord's key and certificate chain in one PEM file (ssl.keystore.location)
#   admin.password       the super user `admin` (super.users): manages users and ACLs
#   app.password         the Kafka client user `app` (ACLs: read and write topics, join groups)
#   prometheus.password  Prometheus's HTTP Basic user (kcoord.metrics.auth.users; no Kafka ACL)
#   admin.properties, app.properties   --command-config files for `kcoord` (and Kafka tools) on this host
# At `docker compose --profile secure up`, the one-shot service kcoord-secrets copies each file into the
# volume of the one service that reads it, owned by that container's user (deploy/secure/install-secrets.sh).
# Nothing here is committed. Run it once; remove the directory to make new ones.
set -eu
out="${1:-$(dirname "$0")/generated}"
umask 077
mkdir -p "$out"
chmod 0700 "$out"
cd "$out"
out=$(pwd)
if [ -e server.pem ]; then
    echo "kept existing certificates and passwords in $out (remove the directory to make new ones)"
    exit 0
fi
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 825 \
    -subj "/CN=kcoord compose CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
printf 'subjectAltName=DNS:kcoord-secure,DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
openssl req -new -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=kcoord-secure" 2>/dev/null
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt \
    -days 825 -sha256 -extfile server.ext 2>/dev/null
cat server.key server.crt > server.pem
rm -f ca.key ca.srl server.csr server.ext server.key server.crt
for user in admin app prometheus; do
    openssl rand -hex 24 | tr -d '\n' > "$user.password"
done
for user in admin app; do
    {
        echo "security.protocol=SASL_SSL"
        echo "sasl.mechanism=SCRAM-SHA-512"
        echo "sasl.username=$user"
        echo "sasl.password=$(cat "$user.password")"
        echo "ssl.ca.location=$out/ca.pem"
    } > "$user.properties"
done
chmod 0644 ca.pem
chmod 0600 server.pem admin.password app.password prometheus.password admin.properties app.properties
echo "wrote ca.pem, server.pem, {admin,app,prometheus}.password and {admin,app}.properties to $out"
