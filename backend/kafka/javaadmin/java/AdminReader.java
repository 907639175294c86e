package groupscope.read;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.StringReader;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiConsumer;
import java.util.function.Function;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ClassicGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeFeaturesOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.DescribeClassicGroupsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListStreamsGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsOptions;
import org.apache.kafka.clients.admin.DescribeStreamsGroupsOptions;
import org.apache.kafka.clients.admin.DescribeShareGroupsOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListGroupsResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListStreamsGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.MemberAssignment;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

import py4j.GatewayServer;

/**
 * groupscope's reading side of a Kafka cluster: Kafka's own Admin client, asked by a Python
 * process through py4j (backend/kafka/javaadmin/gateway.py).
 *
 * Every method answers one JSON text, so a whole answer crosses the bridge in one round trip
 * instead of one per Java object; lists of names come in as one text separated by NUL
 * characters for the same reason. A failure of the whole call is {"error": "..."}, a failure
 * of one group or partition is an "error" beside its siblings' answers. This class keeps no
 * history: the Python side owns every timeline, and may kill and restart this JVM at will.
 *
 * Only read APIs are called here. Start-up: the client's properties arrive on standard input
 * (never in argv or the environment), ending with a line "--end--" followed by the gateway's
 * auth token; the port is printed as "PORT n" (or "ERROR line" when the client refuses the
 * settings). End of standard input, i.e. the parent's
 * death, ends the JVM.
 */
public final class AdminReader {
    private static final String SEP = "\u0000";
    /**
     * How long one Admin call waits for a node before naming it failed. The Admin retries a
     * node that just died (a partition's leader, a group's coordinator, a broker asked for
     * its groups) until the call's timeout; the next call looks them up afresh.
     */
    private static final int NODE_WAIT_MS = 3000;
    /**
     * The node wait until this JVM's first answer: its first connections (a TLS handshake in
     * a cold JVM on a loaded machine) have taken longer than NODE_WAIT_MS with no node dead.
     */
    private static final int FIRST_NODE_WAIT_MS = 10000;
    private static volatile boolean answered;
    private final Admin admin;

    private AdminReader(Properties props) {
        this.admin = Admin.create(props);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder text = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null && !line.equals("--end--")) {
            text.append(line).append('\n');
        }
        String token = in.readLine();
        if (token == null) {
            System.exit(2);
        }
        Properties props = new Properties();
        props.load(new StringReader(text.toString()));
        AdminReader reader;
        try {
            reader = new AdminReader(props);
        } catch (Exception e) {
            // settings the client refuses: one line for the parent instead of a port
            Throwable root = e;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            System.out.println("ERROR " + line(e) + (root == e ? "" : " (" + line(root) + ")"));
            System.out.flush();
            Runtime.getRuntime().halt(3);
            return;
        }
        GatewayServer server = new GatewayServer.GatewayServerBuilder()
                .entryPoint(reader)
                .javaPort(0)
                .javaAddress(InetAddress.getLoopbackAddress())
                .authToken(token)
                .build();
        server.start();
        System.out.println("PORT " + server.getListeningPort());
        System.out.flush();
        while (in.read() != -1) {
            // nothing more is sent; end of input means the parent is gone
        }
        Runtime.getRuntime().halt(0);
    }

    // ---- cluster and topics ------------------------------------------------------------

    /** The brokers that answer, the controller and the cluster id. */
    public String cluster(int timeoutMs) {
        return answer(timeoutMs, end -> {
            DescribeClusterResult r = admin.describeCluster(
                    new DescribeClusterOptions().timeoutMs(nodeWait(timeoutMs)));
            Collection<Node> nodes = get(r.nodes(), end);
            Node controller = get(r.controller(), end);
            Json j = new Json().open();
            j.key("cluster_id").str(get(r.clusterId(), end));
            j.key("controller").num(controller == null ? -1 : controller.id());
            j.key("brokers").openList();
            for (Node n : nodes) {
                j.openList().num(n.id()).str(n.host()).num(n.port()).str(n.rack()).closeList();
            }
            return j.closeList().close().toString();
        });
    }

    /**
     * The cluster's finalized features: name -> level (metadata.version names the release;
     * share.version, streams.version and group.version switch group types on).
     */
    public String features(int timeoutMs) {
        return answer(timeoutMs, end -> {
            FeatureMetadata f = get(admin.describeFeatures(
                    new DescribeFeaturesOptions().timeoutMs(nodeWait(timeoutMs))).featureMetadata(), end);
            Json j = new Json().open().key("finalized").open();
            for (Map.Entry<String, FinalizedVersionRange> e : f.finalizedFeatures().entrySet()) {
                j.key(e.getKey()).num(e.getValue().maxVersionLevel());
            }
            return j.close().close().toString();
        });
    }

    /**
     * Partitions of the named topics (all the principal may describe when `names` is empty):
     * per partition [partition, leader or -1, replicas, isr]; a topic that cannot be
     * described is an error of its own.
     */
    public String topics(String names, int timeoutMs) {
        return answer(timeoutMs, end -> {
            Collection<String> wanted = split(names);
            if (wanted.isEmpty()) {
                wanted = get(admin.listTopics(new ListTopicsOptions().listInternal(true).timeoutMs(nodeWait(timeoutMs))).names(), end);
            }
            Map<String, KafkaFuture<TopicDescription>> futures =
                    admin.describeTopics(wanted,
                            new DescribeTopicsOptions().timeoutMs(nodeWait(timeoutMs))).topicNameValues();
            Json j = new Json().open().key("topics").open();
            Json errors = new Json().open();
            for (Map.Entry<String, KafkaFuture<TopicDescription>> e : futures.entrySet()) {
                try {
                    TopicDescription d = get(e.getValue(), end);
                    j.key(e.getKey()).openList();
                    for (TopicPartitionInfo p : d.partitions()) {
                        j.openList().num(p.partition()).num(p.leader() == null ? -1 : p.leader().id());
                        nodeIds(j, p.replicas());
                        nodeIds(j, p.isr());
                        j.closeList();
                    }
                    j.closeList();
                } catch (Exception ex) {
                    errors.key(e.getKey()).str(line(ex));
                }
            }
            j.close().key("errors").raw(errors.close().toString());
            return j.close().toString();
        });
    }

    // ---- groups ------------------------------------------------------------------------

    /** Every group of every type: [id, type, protocol, state]. */
    public String listGroups(int timeoutMs) {
        return answer(timeoutMs, end -> {
            ListGroupsResult r = admin.listGroups(new ListGroupsOptions().timeoutMs(nodeWait(timeoutMs)));
            Collection<GroupListing> all = get(r.valid(), end);
            Collection<Throwable> errors = get(r.errors(), end);
            // Admin asks for the brokers first; when that fails it reports no listing and one
            // bare KafkaException ("Failed to find brokers ...") among the errors instead of
            // failing the call. That is no partial listing but an unreachable cluster.
            if (all.isEmpty() && errors.size() == 1) {
                Throwable only = errors.iterator().next();
                if (only.getClass() == KafkaException.class && only.getCause() instanceof Exception cause) {
                    throw cause;
                }
            }
            Json j = new Json().open().key("groups").openList();
            for (GroupListing g : all) {
                j.openList().str(g.groupId())
                        .str(g.type().map(t -> t.toString().toLowerCase()).orElse(""))
                        .str(g.protocol())
                        .str(g.groupState().map(Object::toString).orElse("Unknown"))
                        .closeList();
            }
            j.closeList().key("errors").openList();
            for (Throwable t : errors) {
                j.str(line(t));
            }
            return j.closeList().close().toString();
        });
    }

    /** Classic and consumer (KIP-848) groups, many per request. */
    public String describeConsumerGroups(String ids, int timeoutMs) {
        return answer(timeoutMs, end -> describe(admin.describeConsumerGroups(split(ids),
                new DescribeConsumerGroupsOptions().timeoutMs(nodeWait(timeoutMs))).describedGroups(), end,
                (j, d) -> group(j, d.type().toString().toLowerCase(), d.groupState(), d.partitionAssignor(),
                        d.groupEpoch().orElse(null), d.targetAssignmentEpoch().orElse(null)),
                ConsumerGroupDescription::members,
                (j, m) -> consumerMember(j, m, m.memberEpoch().orElse(null), m.targetAssignment())));
    }

    /**
     * Classic groups through the classic API alone: describeConsumerGroups asks a classic
     * group with the newer API first and retries after its refusal.
     */
    public String describeClassicGroups(String ids, int timeoutMs) {
        return answer(timeoutMs, end -> describe(admin.describeClassicGroups(split(ids),
                new DescribeClassicGroupsOptions().timeoutMs(nodeWait(timeoutMs))).describedGroups(), end,
                (j, d) -> group(j, "classic", d.state(), d.protocolData(), null, null),
                ClassicGroupDescription::members,
                (j, m) -> consumerMember(j, m, null, Optional.empty())));
    }

    /** Share groups (KIP-932): members and the partitions each is assigned, shared or not. */
    public String describeShareGroups(String ids, int timeoutMs) {
        return answer(timeoutMs, end -> describe(admin.describeShareGroups(split(ids),
                new DescribeShareGroupsOptions().timeoutMs(nodeWait(timeoutMs))).describedGroups(), end,
                (j, d) -> group(j, "share", d.groupState(), "simple", d.groupEpoch(), d.targetAssignmentEpoch()),
                ShareGroupDescription::members,
                (j, m) -> {
                    member(j, m.consumerId(), m.clientId(), m.host(), m.memberEpoch()).key("assignment");
                    partitions(j, m.assignment().topicPartitions());
                }));
    }

    /** Streams groups (KIP-1071): members with their active, standby and warm-up tasks. */
    public String describeStreamsGroups(String ids, int timeoutMs) {
        return answer(timeoutMs, end -> describe(admin.describeStreamsGroups(split(ids),
                new DescribeStreamsGroupsOptions().timeoutMs(nodeWait(timeoutMs))).describedGroups(), end,
                (j, d) -> group(j, "streams", d.groupState(), null, d.groupEpoch(), d.targetAssignmentEpoch()),
                StreamsGroupDescription::members,
                (j, m) -> {
                    member(j, m.memberId(), m.clientId(), m.clientHost(), m.memberEpoch())
                            .key("instance_id").str(m.instanceId().orElse(null))
                            .key("process_id").str(m.processId());
                    StreamsGroupMemberAssignment a = m.assignment();
                    tasks(j.key("active"), a.activeTasks());
                    tasks(j.key("standby"), a.standbyTasks());
                    tasks(j.key("warmup"), a.warmupTasks());
                }));
    }

    /**
     * One describe answer, whatever the group type: per group what `group` writes of it,
     * then "members", one object each that `member` opens and fills. Each type differs only
     * in those two, so the answers keep one layout for the Python side to read.
     */
    private static <D, M> String describe(Map<String, KafkaFuture<D>> futures, long end,
                                          BiConsumer<Json, D> group, Function<D, Collection<M>> members,
                                          BiConsumer<Json, M> member) {
        return perGroup(futures, end, (j, d) -> {
            group.accept(j, d);
            j.key("members").openList();
            for (M m : members.apply(d)) {
                member.accept(j, m);
                j.close();
            }
            j.closeList();
        });
    }

    /** What every group type's description starts with: its keys before "members". */
    private static void group(Json j, String type, Enum<?> state, String assignor, Integer epoch,
                              Integer targetEpoch) {
        j.key("type").str(type).key("state").str(state.toString()).key("assignor").str(assignor)
                .key("epoch").num(epoch).key("target_epoch").num(targetEpoch);
    }

    /** What every member starts with; the member's object is left open. */
    private static Json member(Json j, String id, String clientId, String host, Integer epoch) {
        return j.open().key("id").str(id).key("client_id").str(clientId).key("host").str(host)
                .key("epoch").num(epoch);
    }

    /**
     * A classic or consumer group's member. The classic API knows neither a member's epoch
     * nor its target assignment, so describeClassicGroups passes null and empty for them.
     */
    private static void consumerMember(Json j, MemberDescription m, Integer epoch,
                                       Optional<MemberAssignment> target) {
        member(j, m.consumerId(), m.clientId(), m.host(), epoch)
                .key("instance_id").str(m.groupInstanceId().orElse(null))
                .key("assignment");
        partitions(j, m.assignment().topicPartitions());
        j.key("target");
        if (target.isPresent()) {
            partitions(j, target.get().topicPartitions());
        } else {
            j.raw("null");
        }
    }

    /** One answer per group: what `write` says of its value, or the error it failed with. */
    private static <T> String perGroup(Map<String, KafkaFuture<T>> futures, long end,
                                       BiConsumer<Json, T> write) {
        return perGroup(futures, end, write, null);
    }

    /**
     * As above; with `known` (group -> the digest of the answer its caller holds), a group
     * whose answer has that digest is sent as {"same": true}, and every other one carries its
     * "digest". A large cluster's groups mostly commit nothing new from one cycle to the next,
     * and their answers are most of what the caller would parse again. The digest is of the
     * answer's text, so "same" means the caller would parse exactly what it holds.
     */
    private static <T> String perGroup(Map<String, KafkaFuture<T>> futures, long end,
                                       BiConsumer<Json, T> write, Map<String, String> known) {
        MessageDigest md = known == null ? null : md5();
        Json j = new Json().open();
        for (Map.Entry<String, KafkaFuture<T>> e : futures.entrySet()) {
            j.key(e.getKey());
            try {
                T value = get(e.getValue(), end);
                if (md == null) {
                    j.open();
                    write.accept(j, value);
                    j.close();
                    continue;
                }
                Json one = new Json().open();
                write.accept(one, value);
                String text = one.close().toString();
                String digest = digest(md, text);
                if (digest.equals(known.get(e.getKey()))) {
                    j.raw("{\"same\":true}");
                } else {
                    // the group's object with its digest as one more key
                    j.raw(text.substring(0, text.length() - 1) + (text.length() > 2 ? "," : "")
                            + "\"digest\":\"" + digest + "\"}");
                }
            } catch (Exception ex) {
                j.open().key("error").str(line(ex)).close();
            }
        }
        return j.close().toString();
    }

    private static MessageDigest md5() {
        try {
            return MessageDigest.getInstance("MD5");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** 64 bits of the text's MD5, in hex: a change it misses is one in 2^64 (no adversary). */
    private static String digest(MessageDigest md, String text) {
        byte[] d = md.digest(text.getBytes(StandardCharsets.UTF_8));
        StringBuilder hex = new StringBuilder(16);
        for (int i = 0; i < 8; i++) {
            hex.append(Character.forDigit((d[i] >> 4) & 0xf, 16)).append(Character.forDigit(d[i] & 0xf, 16));
        }
        return hex.toString();
    }

    /**
     * Committed offsets of many groups in one call (Kafka batches them per coordinator):
     * group -> {"offsets": [[topic, partition, offset, lag or null]]} or {"error": ...}.
     * For share groups the offset is the share-partition start offset and the lag the one
     * the broker reports (KIP-1226), for the others the lag is left to the caller.
     */
    public String committedOffsets(String ids, String type, int timeoutMs) {
        return committedOffsetsSince(ids, null, type, timeoutMs);
    }

    /**
     * As committedOffsets, for a caller that holds earlier answers: `known` is, in the order
     * of `ids`, the digest of the answer it holds for each group ("" for none). A group whose
     * answer is unchanged is answered {"same": true}; every other carries its "digest".
     */
    public String committedOffsetsSince(String ids, String known, String type, int timeoutMs) {
        return answer(timeoutMs, end -> {
            List<String> groups = split(ids);
            Map<String, String> held = null;
            if (known != null) {
                held = new HashMap<>();
                List<String> digests = split(known);
                for (int i = 0; i < groups.size() && i < digests.size(); i++) {
                    held.put(groups.get(i), digests.get(i));
                }
            }
            if (type.equals("share")) {
                var result = admin.listShareGroupOffsets(each(groups, g -> new ListShareGroupOffsetsSpec()),
                        new ListShareGroupOffsetsOptions().timeoutMs(nodeWait(timeoutMs)));
                return perGroup(each(groups, result::partitionsToOffsetInfo), end,
                        (j, m) -> offsets(j, m, info -> info.startOffset(), info -> info.lag().orElse(null)),
                        held);
            }
            Map<String, KafkaFuture<Map<TopicPartition, OffsetAndMetadata>>> futures;
            if (type.equals("streams")) {
                var result = admin.listStreamsGroupOffsets(each(groups, g -> new ListStreamsGroupOffsetsSpec()),
                        new ListStreamsGroupOffsetsOptions().timeoutMs(nodeWait(timeoutMs)));
                futures = each(groups, result::partitionsToOffsetAndMetadata);
            } else {
                var result = admin.listConsumerGroupOffsets(each(groups, g -> new ListConsumerGroupOffsetsSpec()),
                        new ListConsumerGroupOffsetsOptions().timeoutMs(nodeWait(timeoutMs)));
                futures = each(groups, result::partitionsToOffsetAndMetadata);
            }
            return perGroup(futures, end, (j, m) -> offsets(j, m, OffsetAndMetadata::offset, o -> null), held);
        });
    }

    /**
     * Each of `groups` with what `of` gives it, in the groups' order: the specs a group-offsets
     * call asks with, then the futures its result answers with.
     */
    private static <V> Map<String, V> each(List<String> groups, Function<String, V> of) {
        Map<String, V> out = new LinkedHashMap<>();
        groups.forEach(g -> out.put(g, of.apply(g)));
        return out;
    }

    /** "offsets": [[topic, partition, offset, lag or null]] of one group's answer. */
    private static <V> void offsets(Json j, Map<TopicPartition, V> m, Function<V, Long> offset,
                                    Function<V, Long> lag) {
        j.key("offsets").openList();
        for (Map.Entry<TopicPartition, V> e : m.entrySet()) {
            if (e.getValue() != null) {
                j.openList().str(e.getKey().topic()).num(e.getKey().partition())
                        .num(offset.apply(e.getValue())).num(lag.apply(e.getValue())).closeList();
            }
        }
        j.closeList();
    }

    /**
     * Offsets of partitions: `request` is topic, partition, spec triples separated by NUL,
     * a spec being "latest", "earliest" or a timestamp in ms (the first offset at or after
     * it, -1 when there is none). Answers [[topic, partition, offset, timestamp]] and a
     * per-partition error list (a leaderless partition, say).
     */
    public String listOffsets(String request, int timeoutMs) {
        return answer(timeoutMs, end -> {
            List<String> parts = split(request);
            Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
            for (int i = 0; i + 2 < parts.size(); i += 3) {
                String spec = parts.get(i + 2);
                OffsetSpec s = spec.equals("latest") ? OffsetSpec.latest()
                        : spec.equals("earliest") ? OffsetSpec.earliest()
                        : OffsetSpec.forTimestamp(Long.parseLong(spec));
                specs.put(new TopicPartition(parts.get(i), Integer.parseInt(parts.get(i + 1))), s);
            }
            ListOffsetsResult r = admin.listOffsets(specs,
                    new ListOffsetsOptions().timeoutMs(nodeWait(timeoutMs)));
            return perPartition(specs.keySet(), tp -> {
                ListOffsetsResult.ListOffsetsResultInfo info = get(r.partitionResult(tp), end);
                return new long[] {info.offset(), info.timestamp()};
            });
        });
    }

    /**
     * Log-end and log-start offsets of partitions (topic, partition pairs separated by NUL),
     * both asked at once: [[topic, partition, end, start]] and a per-partition error list.
     * A partition whose leader just died fails after NODE_WAIT_MS instead of the call's
     * whole deadline.
     */
    public String logOffsets(String request, int timeoutMs) {
        return answer(timeoutMs, end -> {
            List<String> parts = split(request);
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
            for (int i = 0; i + 1 < parts.size(); i += 2) {
                TopicPartition tp = new TopicPartition(parts.get(i), Integer.parseInt(parts.get(i + 1)));
                latest.put(tp, OffsetSpec.latest());
                earliest.put(tp, OffsetSpec.earliest());
            }
            ListOffsetsOptions options = new ListOffsetsOptions().timeoutMs(nodeWait(timeoutMs));
            ListOffsetsResult ends = admin.listOffsets(latest, options);
            ListOffsetsResult starts = admin.listOffsets(earliest, options);
            return perPartition(latest.keySet(), tp -> new long[] {
                    get(ends.partitionResult(tp), end).offset(), get(starts.partitionResult(tp), end).offset()});
        });
    }

    /** What one partition's row carries after its topic and partition (may throw its error). */
    @FunctionalInterface
    private interface PartitionRow {
        long[] read(TopicPartition tp) throws Exception;
    }

    /**
     * {"offsets": [[topic, partition, ...what `row` reads]], "errors": [[topic, partition,
     * error]]}: a partition that fails (a leaderless one, say) leaves its siblings' rows.
     * A row is read whole before it is written, so a failure leaves no half row behind.
     */
    private static String perPartition(Collection<TopicPartition> tps, PartitionRow row) {
        Json j = new Json().open().key("offsets").openList();
        Json errors = new Json().openList();
        for (TopicPartition tp : tps) {
            try {
                long[] values = row.read(tp);
                j.openList().str(tp.topic()).num(tp.partition());
                for (long v : values) {
                    j.num(v);
                }
                j.closeList();
            } catch (Exception ex) {
                errors.openList().str(tp.topic()).num(tp.partition()).str(line(ex)).closeList();
            }
        }
        j.closeList().key("errors").raw(errors.closeList().toString());
        return j.close().toString();
    }

    // ---- helpers -----------------------------------------------------------------------

    /** A public method's work: its JSON answer, given the call's deadline `end`. */
    @FunctionalInterface
    private interface Work {
        String answer(long end) throws Exception;
    }

    /**
     * What `work` answers within `timeoutMs`, or {"error": ...} when the whole call fails:
     * every public method answers so, and a failure never crosses the bridge as an exception.
     */
    private static String answer(int timeoutMs, Work work) {
        try {
            String out = work.answer(deadline(timeoutMs));
            answered = true;
            return out;
        } catch (Exception e) {
            return failure(e);
        }
    }

    private static int nodeWait(int timeoutMs) {
        return Math.min(timeoutMs, answered ? NODE_WAIT_MS : FIRST_NODE_WAIT_MS);
    }

    /** The deadline of a call that started now and may take `timeoutMs`. */
    private static long deadline(int timeoutMs) {
        return System.nanoTime() + timeoutMs * 1_000_000L;
    }

    /** A future's value, waiting no later than the call's deadline `end` (System.nanoTime). */
    private static <T> T get(KafkaFuture<T> f, long end) throws Exception {
        long left = Math.max(1L, end - System.nanoTime());
        try {
            return f.get(left, TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            if (cause instanceof Exception ex) {
                throw ex;
            }
            throw e;
        } catch (TimeoutException e) {
            throw new TimeoutException("no answer before the call's deadline");
        }
    }

    private static List<String> split(String joined) {
        List<String> out = new ArrayList<>();
        if (joined == null || joined.isEmpty()) {
            return out;
        }
        for (String s : joined.split(SEP, -1)) {
            out.add(s);
        }
        return out;
    }

    /** One line naming the error: Kafka's exception class and its message. */
    private static String line(Throwable t) {
        String msg = t.getMessage() == null ? "" : ": " + t.getMessage();
        String text = t.getClass().getSimpleName() + msg;
        int nl = text.indexOf('\n');
        return nl < 0 ? text : text.substring(0, nl);
    }

    private static String failure(Exception e) {
        return new Json().open().key("error").str(line(e)).close().toString();
    }

    private static void nodeIds(Json j, List<Node> nodes) {
        j.openList();
        for (Node n : nodes) {
            j.num(n.id());
        }
        j.closeList();
    }

    private static void partitions(Json j, Collection<TopicPartition> tps) {
        j.openList();
        for (TopicPartition tp : tps) {
            j.openList().str(tp.topic()).num(tp.partition()).closeList();
        }
        j.closeList();
    }

    private static void tasks(Json j, List<StreamsGroupMemberAssignment.TaskIds> tasks) {
        j.openList();
        for (StreamsGroupMemberAssignment.TaskIds t : tasks) {
            j.openList().str(t.subtopologyId()).openList();
            for (Integer p : t.partitions()) {
                j.num(p);
            }
            j.closeList().closeList();
        }
        j.closeList();
    }

    /** A JSON writer just big enough for these answers: commas are placed by the writer. */
    static final class Json {
        private final StringBuilder b = new StringBuilder();
        private boolean first = true;

        private void sep() {
            if (!first) {
                b.append(',');
            }
            first = false;
        }

        Json open() {
            return start('{');
        }

        Json close() {
            return end('}');
        }

        Json openList() {
            return start('[');
        }

        Json closeList() {
            return end(']');
        }

        /** An object or list opened where a value goes; its first member will want no comma. */
        private Json start(char bracket) {
            sep();
            b.append(bracket);
            first = true;
            return this;
        }

        /** An object or list closed: a value, so whatever follows it wants a comma. */
        private Json end(char bracket) {
            b.append(bracket);
            first = false;
            return this;
        }

        Json key(String k) {
            sep();
            quote(k);
            b.append(':');
            first = true;
            return this;
        }

        Json str(String s) {
            sep();
            if (s == null) {
                b.append("null");
            } else {
                quote(s);
            }
            return this;
        }

        Json num(Number n) {
            sep();
            b.append(n == null ? "null" : n.toString());
            return this;
        }

        Json raw(String text) {
            sep();
            b.append(text);
            return this;
        }

        private void quote(String s) {
            b.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> b.append("\\\"");
                    case '\\' -> b.append("\\\\");
                    case '\n' -> b.append("\\n");
                    case '\r' -> b.append("\\r");
                    case '\t' -> b.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            b.append(String.format("\\u%04x", (int) c));
                        } else {
                            b.append(c);
                        }
                    }
                }
            }
            b.append('"');
        }

        @Override
        public String toString() {
            return b.toString();
        }
    }
}
