// PostgreSQL's client library, for NoteKitMirror alone (Debian: libpq-dev; pkg-config: libpq).
#include <libpq-fe.h>
