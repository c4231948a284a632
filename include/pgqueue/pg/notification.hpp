// A NOTIFY message as delivered to a subscription.
#pragma once

#include <string>

namespace pgqueue::pg {

/// One notification received on a LISTENed channel. Copyable value type.
struct notification {
  std::string channel;  ///< Channel name exactly as the server reports it (unquoted).
  std::string payload;  ///< Payload text; empty when NOTIFY had none.
  int backend_pid = 0;  ///< PID of the server process that sent the NOTIFY.
  /// Not a NOTIFY but a marker: the connection was re-established and the channel LISTENed
  /// again, so notifications sent while it was down are lost; re-check whatever you wait for.
  /// (payload empty, backend_pid 0).
  bool reconnected = false;
};

}  // namespace pgqueue::pg
