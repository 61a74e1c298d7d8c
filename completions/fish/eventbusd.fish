# fish completion for eventbusd, generated from its declaration by eventbus-manual: do not edit.

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

complete -c eventbusd -f
complete -c eventbusd -s s -l socket -r -F -d 'listen on PATH'
complete -c eventbusd -l system -d 'the system bus, /run/eventbus/bus.sock'
complete -c eventbusd -l user -d 'the user bus, $XDG_RUNTIME_DIR/eventbus/bus.sock'
complete -c eventbusd -l mode -x -d 'permissions of the socket file'
complete -c eventbusd -l max-frame -x -d 'largest incoming frame'
complete -c eventbusd -l max-outbound -x -d 'outbound queue per connection'
complete -c eventbusd -l max-queued -x -d 'all outbound queues together'
complete -c eventbusd -l max-connections -x -d 'connections at most'
complete -c eventbusd -l max-subscriptions -x -d 'patterns per connection'
complete -c eventbusd -l stall-timeout -x -d 'the stall timeout'
complete -c eventbusd -l trusted-hold-window -x -d 'the window'
complete -c eventbusd -l max-request-timeout -x -d 'the largest timeout a request may ask for'
complete -c eventbusd -l max-pending-requests -x -d 'per connection'
complete -c eventbusd -l max-group-members -x -d 'members of one group'
complete -c eventbusd -l max-connections-per-uid -x -d 'connections'
complete -c eventbusd -l max-subscriptions-per-uid -x -d 'patterns over its connections'
complete -c eventbusd -l max-inbound-per-uid -x -d 'bytes of incomplete incoming frames'
complete -c eventbusd -l max-outbound-per-uid -x -d 'outbound queues together'
complete -c eventbusd -l max-retained-bytes-per-uid -x -d 'retained events it published'
complete -c eventbusd -l max-subscriptions-total -x -d 'patterns'
complete -c eventbusd -l max-inbound -x -d 'bytes of incomplete incoming frames'
complete -c eventbusd -l max-retained -x -d 'retained events'
complete -c eventbusd -l max-retained-bytes -x -d 'bytes of retained events'
complete -c eventbusd -l frame-timeout -x -d 'close a connection whose incomplete frame gets no byte for DURATION...'
complete -c eventbusd -l state-dir -x -a '(__fish_complete_directories)' -d 'keep retained events in DIR/retained.jsonl across restarts'
complete -c eventbusd -l history-events -x -d 'events kept for \'subscribe\' with \'since\''
complete -c eventbusd -l history-bytes -x -d 'bytes of events kept for it'
complete -c eventbusd -l bridge -r -F -d 'run the link with the settings of FILE, in bridge.conf\'s format'
complete -c eventbusd -l bridge-user -x -d 'the link\'s connection is this user\'s, for the policy and the limits'
complete -c eventbusd -l policy -r -F -d 'read the policy from FILE'
complete -c eventbusd -l check-policy -d 'read FILE...'
complete -c eventbusd -s c -l config -r -F -d 'read FILE'
complete -c eventbusd -l check-config -d 'read the file and the command line, print every setting given and w...'
complete -c eventbusd -l exit-idle-time -x -d 'exit after DURATION with no connections'
complete -c eventbusd -l shutdown-timeout -x -d 'how long SIGTERM/SIGINT waits for queued events to be written'
complete -c eventbusd -l log-level -x -a 'error warning notice info debug' -d 'error, warning, notice, info'
complete -c eventbusd -s h -l help -d 'show this help'
complete -c eventbusd -s V -l version -d 'show the version'
complete -c eventbusd -r -F
