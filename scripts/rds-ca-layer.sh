#!/usr/bin/env bash
# Publishes the CA bundle that DATABASE_TLS=verify-full checks the database against, as a Lambda
# layer: the zip holds rds/global-bundle.pem, which Lambda extracts to
# /opt/rds/global-bundle.pem (the template's DatabaseCaFile default). Prints the layer version
# ARN to pass as DatabaseCaLayerArn (or to `cargo lambda deploy --layer`).
#
#   scripts/rds-ca-layer.sh                    # the RDS global bundle, downloaded from AWS
#   scripts/rds-ca-layer.sh --proxy            # plus Amazon Root CA 1, which RDS Proxy's
#                                              # certificates chain to (CreateRdsProxy=true)
#   scripts/rds-ca-layer.sh ./global-bundle.pem ./AmazonRootCA1.pem   # files or URLs you choose
#   scripts/rds-ca-layer.sh --zip-only ...     # build target/rds-ca-layer.zip, publish nothing
#
# Options: --layer-name NAME (default hookclaim-rds-ca), --region REGION (default: the AWS CLI's).
# Needs curl for URLs and the AWS CLI to publish; python3 builds the zip.
set -euo pipefail
cd "$(dirname "$0")/.."

RDS_BUNDLE_URL=https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem
AMAZON_ROOT_CA1_URL=https://www.amazontrust.com/repository/AmazonRootCA1.pem

layer_name=hookclaim-rds-ca
region_args=()
zip_only=false
proxy=false
sources=()
while [ $# -gt 0 ]; do
  case "$1" in
    --layer-name) layer_name=$2; shift 2 ;;
    --region) region_args=(--region "$2"); shift 2 ;;
    --zip-only) zip_only=true; shift ;;
    --proxy) proxy=true; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "rds-ca-layer.sh: unknown option $1" >&2; exit 2 ;;
    *) sources+=("$1"); shift ;;
  esac
done
if [ ${#sources[@]} -eq 0 ]; then
  sources=("$RDS_BUNDLE_URL")
fi
if $proxy; then
  sources+=("$AMAZON_ROOT_CA1_URL")
fi

work=target/rds-ca-layer
rm -rf "$work"
mkdir -p "$work/rds"
bundle=$work/rds/global-bundle.pem
: > "$bundle"
for src in "${sources[@]}"; do
  part=$work/part.pem
  case "$src" in
    http://*|https://*) curl -fsSL --retry 3 -o "$part" "$src" ;;
    *) cp "$src" "$part" ;;
  esac
  # A bundle without a certificate would only fail later, at every cold start.
  if ! grep -q -- '-----BEGIN CERTIFICATE-----' "$part"; then
    echo "rds-ca-layer.sh: $src holds no PEM certificate" >&2
    exit 1
  fi
  cat "$part" >> "$bundle"
  echo >> "$bundle"
  rm -f "$part"
done
count=$(grep -c -- '-----BEGIN CERTIFICATE-----' "$bundle")

zip=target/rds-ca-layer.zip
python3 - "$work" "$zip" <<'PY'
import sys, zipfile
work, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    z.write(f"{work}/rds/global-bundle.pem", "rds/global-bundle.pem")
PY
echo "built $zip: rds/global-bundle.pem with $count certificates (/opt/rds/global-bundle.pem in Lambda)" >&2
if $zip_only; then
  exit 0
fi

aws lambda publish-layer-version "${region_args[@]}" \
  --layer-name "$layer_name" \
  --description "CA bundle for hookclaim's DATABASE_TLS=verify-full (/opt/rds/global-bundle.pem)" \
  --compatible-runtimes provided.al2023 provided.al2 \
  --compatible-architectures arm64 x86_64 \
  --zip-file "fileb://$zip" \
  --query LayerVersionArn --output text
