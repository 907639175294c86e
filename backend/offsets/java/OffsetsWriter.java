package groupscope.write;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterShareGroupOffsetsResult;
import org.apache.kafka.clients.admin.DeleteConsumerGroupOffsetsResult;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;

/**
 * groupscope's one writer of group offsets that confluent-kafka does not wrap: a share
 * group's start offsets (alterShareGroupOffsets) and a consumer group's committed offsets
 * deleted (deleteConsumerGroupOffsets), with Kafka's own Admin client.
 *
 * A process of its own, started by `groupscope offsets ... --execute` for one request and
 * gone after it (backend/offsets/writer.py): the reading layer's JVM never writes. Standard
 * input: the client's properties, a line "--end--", the request's first line
 * ("alter-share GROUP" or "delete-consumer GROUP"), then one partition a line, tab
 * separated ("TOPIC\tPARTITION\tOFFSET" or "TOPIC\tPARTITION"). Standard output: one line
 * per partition, "OK\tTOPIC\tPARTITION" or "ERR\tTOPIC\tPARTITION\tWHY", then "DONE"; or
 * "ERROR WHY" when the whole request fails.
 */
public final class OffsetsWriter {
    private static final int TIMEOUT_S = 30;

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder text = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null && !line.equals("--end--")) {
            text.append(line).append('\n');
        }
        String head = in.readLine();
        List<String[]> rows = new ArrayList<>();
        while ((line = in.readLine()) != null) {
            if (!line.isEmpty()) {
                rows.add(line.split("\t", -1));
            }
        }
        if (head == null || !head.contains(" ")) {
            System.out.println("ERROR no request");
            System.exit(2);
        }
        String verb = head.substring(0, head.indexOf(' '));
        String group = head.substring(head.indexOf(' ') + 1);
        Properties props = new Properties();
        props.load(new StringReader(text.toString()));
        int code;
        try (Admin admin = Admin.create(props)) {
            if (verb.equals("alter-share")) {
                Map<TopicPartition, Long> offsets = new LinkedHashMap<>();
                for (String[] r : rows) {
                    offsets.put(new TopicPartition(r[0], Integer.parseInt(r[1])), Long.parseLong(r[2]));
                }
                AlterShareGroupOffsetsResult result = admin.alterShareGroupOffsets(group, offsets);
                code = report(offsets.keySet(), tp -> result.partitionResult(tp), result.all());
            } else if (verb.equals("delete-consumer")) {
                Set<TopicPartition> tps = new LinkedHashSet<>();
                for (String[] r : rows) {
                    tps.add(new TopicPartition(r[0], Integer.parseInt(r[1])));
                }
                DeleteConsumerGroupOffsetsResult result = admin.deleteConsumerGroupOffsets(group, tps);
                code = report(tps, tp -> result.partitionResult(tp), result.all());
            } else {
                System.out.println("ERROR unknown request " + verb);
                code = 2;
            }
        } catch (Exception e) {
            System.out.println("ERROR " + line(e));
            code = 1;
        }
        System.out.flush();
        Runtime.getRuntime().halt(code);
    }

    private interface PerPartition {
        KafkaFuture<Void> of(TopicPartition tp);
    }

    /** One line per partition, then DONE; a whole-request failure names its cause. */
    private static int report(Set<TopicPartition> tps, PerPartition each, KafkaFuture<Void> all) {
        try {
            all.get(TIMEOUT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            // per partition below: some may have been taken
        } catch (Exception e) {
            System.out.println("ERROR " + line(e));
            return 1;
        }
        for (TopicPartition tp : tps) {
            try {
                each.of(tp).get(TIMEOUT_S, TimeUnit.SECONDS);
                System.out.println("OK\t" + tp.topic() + "\t" + tp.partition());
            } catch (Exception e) {
                System.out.println("ERR\t" + tp.topic() + "\t" + tp.partition() + "\t" + line(e));
            }
        }
        System.out.println("DONE");
        return 0;
    }

    /** An exception as one line: its cause's class and message, never a stack. */
    private static String line(Throwable e) {
        Throwable root = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        String message = root.getMessage() == null ? "" : root.getMessage().replace('\n', ' ').replace('\t', ' ');
        return root.getClass().getSimpleName() + ": " + message;
    }
}
