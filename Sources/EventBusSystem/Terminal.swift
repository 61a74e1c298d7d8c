// The terminal for a full-screen view (`eventbus top`): its size
// (ioctl(2) TIOCGWINSZ, through the shim: ioctl is variadic) and the
// termios(3) mode that delivers keys one at a time without echo, saved
// first and put back by `restore`.
//
// Before editing: `restore` must run on every way out (quit, SIGINT,
// SIGTERM, SIGTSTP before stopping, an error): the caller owns that; the
// signals are not caught here (ISIG stays on: ^C and ^Z still make signals,
// which the caller reads from a signalfd).
import CEventBusShims
import Glibc

/// Rows and columns of a terminal window.
package struct TerminalSize: Equatable, Sendable {
    /// Lines of text.
    package var rows: Int
    /// Characters per line.
    package var columns: Int

    /// A size of `rows` lines of `columns` characters.
    package init(rows: Int, columns: Int) {
        self.rows = rows
        self.columns = columns
    }
}

extension FileDescriptor {
    /// ioctl(2) TIOCGWINSZ: the window size of the terminal, nil when this
    /// is no terminal (ENOTTY) or the terminal reports 0×0.
    package var terminalSize: TerminalSize? {
        var rows: UInt16 = 0, columns: UInt16 = 0
        guard eventbus_window_size(rawValue, &rows, &columns) == 0, rows > 0, columns > 0 else { return nil }
        return TerminalSize(rows: Int(rows), columns: Int(columns))
    }
}

/// A terminal switched to key-at-a-time input without echo (ICANON and
/// ECHO off, VMIN 1, VTIME 0), and the mode it had before. Does not own
/// the descriptor.
package final class KeyboardMode {
    /// The terminal (not owned: the caller closes it, after `restore`).
    package let descriptor: FileDescriptor
    private let saved: termios

    /// Saves the terminal's mode (tcgetattr(3)) and switches it (`enter`).
    /// - Throws: `SystemError("tcgetattr" | "tcsetattr", errno)`, e.g. ENOTTY.
    package init(_ descriptor: FileDescriptor) throws(SystemError) {
        self.descriptor = descriptor
        var mode = termios()
        _ = try checkedCall("tcgetattr") { tcgetattr(descriptor.rawValue, &mode) }
        saved = mode
        try enter()
    }

    /// Switches to key-at-a-time input again (after `restore`, e.g. on SIGCONT).
    package func enter() throws(SystemError) {
        var mode = saved
        mode.c_lflag &= ~tcflag_t(ICANON | ECHO)
        eventbus_termios_set_cc(&mode, VMIN, 1)
        eventbus_termios_set_cc(&mode, VTIME, 0)
        _ = try checkedCall("tcsetattr") { tcsetattr(descriptor.rawValue, TCSAFLUSH, &mode) }
    }

    /// Puts the saved mode back (tcsetattr(3), TCSAFLUSH); failures are
    /// ignored (the terminal may be gone).
    package func restore() {
        var mode = saved
        _ = systemCall(.retry) { tcsetattr(descriptor.rawValue, TCSAFLUSH, &mode) }
    }
}
