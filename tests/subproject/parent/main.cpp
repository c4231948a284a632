// Compiles and links against pgqueue taken as a subproject; running it needs no server.
#include <pgqueue/pgqueue.hpp>

int main() { return pgqueue::schema_version > 0 ? 0 : 1; }
