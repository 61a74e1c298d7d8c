// Umbrella header for the parts of libsystemd eventbusd uses
// (sd_listen_fds(3), sd_notify(3), sd_watchdog_enabled(3), sd_journal_sendv(3)).
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
