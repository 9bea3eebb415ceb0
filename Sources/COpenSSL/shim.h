// The libcrypto surface StowageCrypto uses (OpenSSL 3). Nothing else lives here.
#ifndef STOWAGE_COPENSSL_SHIM_H
#define STOWAGE_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/hmac.h>
#endif
