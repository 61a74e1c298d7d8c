// eventbusd.conf(5), rendered from eventbusd's declaration: every option that
// is a setting (all but `brokerCommandLineOnly`) as a `key = value` line, with
// its value and help, and the rules of the file (which file, what wins, what
// a reload re-reads).
//
// Before editing: the rules described here are eventbusd's
// (eventbusd/ConfigSelection.swift); say the same as its file comment.
import EventBusCommandLine
import EventBusServer

enum ConfigPage {
    static func page(date: String) -> String {
        let program = brokerInterface
        var out = ".\\\" Generated from eventbusd's declaration by eventbus-manual: do not edit.\n"
        out += ".Dd \(date)\n.Dt EVENTBUSD.CONF 5\n.Os\n"
        out += ".Sh NAME\n.Nm eventbusd.conf\n.Nd settings of the eventbus broker\n"
        out += ".Sh SYNOPSIS\n.Pa /etc/eventbus/eventbusd.conf\n.Pp\n.Pa $XDG_CONFIG_HOME/eventbus/eventbusd.conf\n"
        out += ".Sh DESCRIPTION\n" + Mdoc.prose("""
        eventbusd(8) reads its settings from this file at start, then from its
        command line, which wins: an option given on the command line replaces the
        file's line for it (--policy replaces the file's whole list). The system bus
        (--system, as the shipped unit runs it) reads /etc/eventbus/eventbusd.conf;
        the user bus (--user) reads $XDG_CONFIG_HOME/eventbus/eventbusd.conf
        (~/.config when XDG_CONFIG_HOME is unset); either only when it exists. A
        broker on any other --socket path reads no file unless given --config FILE.

        One setting per line: key = value, blanks around both ignored. A # starts a
        comment at the start of a line or after a blank; blank lines are ignored.
        The keys are the long names of eventbusd's options; a flag's line says yes
        or no. A value is checked as the option's is: an invalid line stops the
        broker from starting (exit status 78, naming the file and line).

        The file is read once, at start. SIGHUP (systemctl reload eventbus) reads
        the access policy files again, not this file: a changed setting needs a
        restart (systemctl restart eventbus; retained events are kept in the state
        directory). 'eventbusd --check-config' checks the file and prints the
        settings in force and where each comes from.

        With none of socket, system and user, the broker listens on
        $EVENTBUS_SOCKET, else on the user bus when XDG_RUNTIME_DIR is set and it
        does not run as root, else on the system bus.
        """)
        out += ".Sh SETTINGS\n"
        for section in program.root.sections {
            let settings = section.options.filter { !brokerCommandLineOnly.contains($0.long) }
            guard !settings.isEmpty else { continue }
            out += ".Ss \(Mdoc.heading(section.title))\n.Bl -tag -width Ds\n"
            for option in settings {
                out += ".It Cm \(option.long) No = Ar \(option.value.map { Mdoc.macroArgument($0.name) } ?? "yes | no")\n"
                let items = option.help.split(separator: "\n").map(String.init)
                for (index, item) in items.enumerated() {
                    if index > 0 { out += ".br\n" }
                    out += Mdoc.text(settingSentence(item))
                }
                out += Mdoc.text("The option \(option.short.map { "-\($0), " } ?? "")--\(option.long).")
            }
            out += ".El\n"
            if let footer = section.footer { out += ".Pp\n" + Mdoc.prose(footer) }
        }
        out += ".Sh FILES\n" + Mdoc.prose("""
        /etc/eventbus/eventbusd.conf: the system bus's settings (a conffile of the
        package: every key, commented out at its default).

        $XDG_CONFIG_HOME/eventbus/eventbusd.conf: the user bus's settings.
        """)
        out += ".Sh EXAMPLES\n.Bd -literal -offset indent\n"
        for line in ["# /etc/eventbus/eventbusd.conf", "exit-idle-time = 5min     # socket activation starts it again", "max-connections-per-uid = 64", "log-level = notice"] {
            out += Mdoc.literal(line)
        }
        out += ".Ed\n"
        out += ".Sh SEE ALSO\n.Xr eventbus-policy 5 ,\n.Xr eventbus 7 ,\n.Xr eventbusd 8\n"
        return out
    }

    /// An option's `--help` line as a sentence of an entry, followed by "The
    /// option --NAME.": with a final full stop, and without the `user`
    /// option's "; otherwise ..." (where the socket is when no socket option
    /// is given: the DESCRIPTION says it once).
    static func settingSentence(_ help: String) -> String {
        var sentence = help
        if let fallback = sentence.firstRange(of: "; otherwise ") { sentence = String(sentence[..<fallback.lowerBound]) }
        if let last = sentence.last, !".!?".contains(last) { sentence += "." }
        return sentence
    }
}
