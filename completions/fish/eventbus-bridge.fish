# fish completion for eventbus-bridge, generated from its declaration by eventbus-manual: do not edit.

# The bus options given on the line, to ask the same broker.
function __eventbus_bus
    set -l tokens (commandline -opc)
    set -l i 1
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case -s --socket
                set i (math $i + 1)
                echo --socket
                echo $tokens[$i]
            case '--socket=*' --system --user
                echo $tokens[$i]
        end
        set i (math $i + 1)
    end
end
# The event types the running broker knows (nothing when none answers).
function __eventbus_types
    timeout (set -q EVENTBUS_COMPLETION_TIMEOUT; and echo $EVENTBUS_COMPLETION_TIMEOUT; or echo 2) eventbus (__eventbus_bus) types --format json 2>/dev/null | string replace -rf '^\{"type":"([^"]*)".*' '$1'
end
# Those types, their prefixes with '.>', and '>'.
function __eventbus_patterns
    for t in (__eventbus_types)
        echo $t
        while string match -q '*.*' -- $t
            set t (string replace -r '\.[^.]*$' '' -- $t)
            echo $t'.>'
        end
    end | sort -u
    echo '>'
end

complete -c eventbus-bridge -f
complete -c eventbus-bridge -s s -l socket -r -F -d 'the broker\'s socket'
complete -c eventbus-bridge -l system -d 'the system bus, /run/eventbus/bus.sock'
complete -c eventbus-bridge -l user -d 'the user bus, $XDG_RUNTIME_DIR/eventbus/bus.sock'
complete -c eventbus-bridge -l nats -x -d 'seed servers'
complete -c eventbus-bridge -l node -x -d 'this bus\'s name in subjects and origin'
complete -c eventbus-bridge -l export -x -a '(__eventbus_patterns)' -d 'local types to send'
complete -c eventbus-bridge -l import -x -a '(__eventbus_patterns)' -d 'remote types to receive'
complete -c eventbus-bridge -l export-requests -x -a '(__eventbus_patterns)' -d 'request types to ask other machines when no local server takes them'
complete -c eventbus-bridge -l import-requests -x -a '(__eventbus_patterns)' -d 'request types other machines may ask this bus\'s servers'
complete -c eventbus-bridge -l export-group -x -d 'queue group NAME\'s events of PATTERN go to another machine when no ...'
complete -c eventbus-bridge -l import-group -x -d 'other machines\' events of group NAME go to one local member of NAME'
complete -c eventbus-bridge -l prefix -x -d 'subject root'
complete -c eventbus-bridge -l name -x -d 'CONNECT name'
complete -c eventbus-bridge -l reconnect-initial -x -d 'NATS backoff after a failed pass'
complete -c eventbus-bridge -l reconnect-max -x -d 'its ceiling'
complete -c eventbus-bridge -l ping-interval -x -d 'NATS keepalive'
complete -c eventbus-bridge -l buffer-events -x -d 'exports held while NATS is away'
complete -c eventbus-bridge -l buffer-bytes -x -d 'and their bytes'
complete -c eventbus-bridge -s c -l config -r -F -d 'read settings from FILE first'
complete -c eventbus-bridge -l status-file -r -F -d 'where the counters are written every second'
complete -c eventbus-bridge -l status -d 'print the counters of the running bridges'
complete -c eventbus-bridge -l log-level -x -a 'error warning notice info debug' -d 'error, warning, notice, info'
complete -c eventbus-bridge -s h -l help -d 'show this help'
complete -c eventbus-bridge -s V -l version -d 'show the version'
