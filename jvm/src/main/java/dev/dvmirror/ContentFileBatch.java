package dev.dvmirror;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Stream;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.ContentFileParser;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileMetadata;
import org.apache.iceberg.HasTableOperations;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RollingManifestWriter;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.SnapshotSummary;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.JsonNode;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.DoubleNode;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.JsonUtil;

/**
 * Content files cross py4j in one call per version instead of several round trips per file.
 *
 * <p>Both directions use Iceberg's own {@link ContentFileParser} JSON, one file per line, so Iceberg
 * builds its {@code DataFile}/{@code DeleteFile} objects itself exactly as it would from single files.
 * The lines travel through a local file that the Python driver and its JVM (always on one machine)
 * share, streamed on both sides, rather than as one large py4j string.
 */
public final class ContentFileBatch {
  /** Line prefixes of {@link #stage}: what to do with the file on the rest of the line. */
  public static final String ADD_DATA = "add-data";
  public static final String REMOVE_DATA = "remove-data";
  public static final String ADD_DELETE = "add-delete";
  public static final String REMOVE_DELETE = "remove-delete";

  private ContentFileBatch() {}

  /**
   * Stages every file listed in the local file {@code linesFile} in {@code rowDelta}, read line by line
   * (a version of 100,000 files never becomes one string on either side of py4j). Each line is
   * {@code <action> TAB <json>}, the action one of the constants above. Returns how many were staged.
   */
  public static int stage(RowDelta rowDelta, String linesFile, PartitionSpec spec) throws IOException {
    ObjectMapper mapper = JsonUtil.mapper();
    int staged = 0;
    try (Stream<String> lines = nonEmptyLines(linesFile)) {
      for (String line : (Iterable<String>) lines::iterator) {
        int tab = line.indexOf('\t');
        if (tab < 0) {
          throw new IllegalArgumentException("content file line without an action: " + abbreviate(line));
        }
        String action = line.substring(0, tab);
        ContentFile<?> file = parse(mapper, line.substring(tab + 1), spec);
        switch (action) {
          case ADD_DATA -> rowDelta.addRows((DataFile) file);
          case REMOVE_DATA -> rowDelta.removeRows((DataFile) file);
          case ADD_DELETE -> rowDelta.addDeletes((DeleteFile) file);
          case REMOVE_DELETE -> rowDelta.removeDeletes((DeleteFile) file);
          default -> throw new IllegalArgumentException("unknown content file action: " + action);
        }
        staged++;
      }
    }
    return staged;
  }

  /** Lines of {@link #stageDeletionVectors}: the Puffin file the following DV lines are blobs of. */
  public static final String PUFFIN = "puffin";

  /**
   * Stages the deletion vectors listed in the local file {@code linesFile} in {@code rowDelta}, in a
   * compact form: a DV has only a few fields, and building it with Iceberg's own {@link
   * FileMetadata#deleteFileBuilder} costs a small fraction of parsing its {@link ContentFileParser}
   * JSON (a JSON tree per file, and a new partition tuple whose Avro schema is converted each time).
   * Lines:
   *
   * <ul>
   *   <li>{@code puffin TAB <spec id> TAB <file size> TAB <path>}: the Puffin file of the DV lines
   *       that follow (the path last, so it may hold tabs);
   *   <li>{@code add-delete|remove-delete TAB <content offset> TAB <content size> TAB <cardinality>
   *       TAB <partition JSON> TAB <referenced data file>}: one DV of that Puffin file.
   * </ul>
   *
   * Each distinct partition JSON is parsed once, by {@link ContentFileParser} itself, so a partition
   * value is read exactly as on the JSON path. Returns how many DVs were staged.
   */
  public static int stageDeletionVectors(RowDelta rowDelta, String linesFile, PartitionSpec spec)
      throws IOException {
    ObjectMapper mapper = JsonUtil.mapper();
    Map<String, StructLike> partitions = new HashMap<>();
    // One builder for every DV: every field a DV has is set again before each build, and a new
    // builder of a partitioned spec would build a new partition tuple (its Avro schema) each time.
    FileMetadata.Builder builder =
        FileMetadata.deleteFileBuilder(spec).ofPositionDeletes().withFormat(FileFormat.PUFFIN);
    boolean inPuffin = false;
    int staged = 0;
    try (Stream<String> lines = nonEmptyLines(linesFile)) {
      for (String line : (Iterable<String>) lines::iterator) {
        if (line.startsWith(PUFFIN + "\t")) {
          String[] puffin = line.split("\t", 4);
          if (puffin.length != 4 || Integer.parseInt(puffin[1]) != spec.specId()) {
            throw new IllegalArgumentException(
                "Puffin line not of partition spec " + spec.specId() + ": " + abbreviate(line));
          }
          builder.withFileSizeInBytes(Long.parseLong(puffin[2])).withPath(puffin[3]);
          inPuffin = true;
          continue;
        }
        String[] fields = line.split("\t", 6);
        if (fields.length != 6 || !inPuffin) {
          throw new IllegalArgumentException("deletion vector line out of place: " + abbreviate(line));
        }
        String partitionJson = fields[4];
        StructLike partition = partitions.get(partitionJson);
        if (partition == null) {
          partition = parsePartition(mapper, partitionJson, spec);
          partitions.put(partitionJson, partition);
        }
        DeleteFile dv =
            builder
                .withContentOffset(Long.parseLong(fields[1]))
                .withContentSizeInBytes(Long.parseLong(fields[2]))
                .withRecordCount(Long.parseLong(fields[3]))
                .withPartition(partition)
                .withReferencedDataFile(fields[5])
                .build();
        switch (fields[0]) {
          case ADD_DELETE -> rowDelta.addDeletes(dv);
          case REMOVE_DELETE -> rowDelta.removeDeletes(dv);
          default -> throw new IllegalArgumentException("unknown deletion vector action: " + fields[0]);
        }
        staged++;
      }
    }
    return staged;
  }

  /** A partition tuple as {@link ContentFileParser} reads it, from the JSON of a DV of that partition. */
  private static StructLike parsePartition(ObjectMapper mapper, String partitionJson, PartitionSpec spec) {
    String dv =
        "{\"spec-id\":"
            + spec.specId()
            + ",\"content\":\"position-deletes\",\"file-path\":\"p\",\"file-format\":\"puffin\","
            + "\"partition\":"
            + partitionJson
            + ",\"file-size-in-bytes\":0,\"record-count\":0,\"referenced-data-file\":\"d\","
            + "\"content-offset\":0,\"content-size-in-bytes\":0}";
    return parse(mapper, dv, spec).partition();
  }

  /**
   * Writes the data files listed in the local file {@code linesFile} (one {@link ContentFileParser}
   * JSON per line) straight into new manifests of {@code table} (the transaction's table: its metadata
   * folder, format version and FileIO), each closed at {@code targetSizeBytes} (at most 0: the table's
   * {@code commit.manifest.target-size-bytes}, as Iceberg's own writer), and appends them to {@code
   * rowDelta}. Neither side of py4j holds every {@code DataFile}: a 1,000,000-file version would
   * otherwise keep each one in the row delta until it writes the manifests itself at commit.
   *
   * <p>The manifests carry no snapshot id: the snapshot inherits them as they are (format 2 and up),
   * as {@code AppendFiles.appendManifest} does. Iceberg's {@code appendManifest} counts only files and
   * records into the snapshot summary; here each file is counted as {@code addRows} counts it (sizes and
   * partitions too), so the summary is the one {@code addRows} gives. Both go through two private
   * members of Iceberg's {@code MergingSnapshotProducer} (the row delta's class), reached only through
   * {@link IcebergInternals}: an Iceberg without them fails there, before any manifest is written.
   *
   * <p>Returns the manifests (their files counted by the writer). They are written now; if the commit
   * then fails, Iceberg does not delete them (an appended manifest becomes the table's only once
   * committed): the caller does.
   *
   * <p>{@code linesFile} may be a FIFO the caller writes while this reads it: lines that end before
   * {@code expectedFiles} files (the writer failed and closed it early) fail here, their manifests
   * deleted, never staged as a complete version.
   */
  public static List<ManifestFile> stageDataManifests(
      RowDelta rowDelta,
      Table table,
      String linesFile,
      PartitionSpec spec,
      long targetSizeBytes,
      long expectedFiles)
      throws IOException {
    TableOperations ops = ((HasTableOperations) table).operations();
    TableMetadata current = ops.current();
    int formatVersion = current.formatVersion();
    if (formatVersion < 2) {
      throw new IllegalArgumentException("appended manifests inherit the snapshot id from format 2 on");
    }
    long targetSize =
        targetSizeBytes > 0
            ? targetSizeBytes
            : current.propertyAsLong(
                TableProperties.MANIFEST_TARGET_SIZE_BYTES,
                TableProperties.MANIFEST_TARGET_SIZE_BYTES_DEFAULT);
    Map<String, String> writerProperties = manifestWriterProperties(current);
    List<ManifestFile> appended = IcebergInternals.appendManifests(rowDelta);
    SnapshotSummary.Builder summary = IcebergInternals.addedDataFilesSummary(rowDelta);
    String prefix = "dvmirror-" + UUID.randomUUID() + "-m";
    int[] count = {0};
    RollingManifestWriter<DataFile> writer =
        new RollingManifestWriter<>(
            () ->
                ManifestFiles.write(
                    formatVersion,
                    spec,
                    table
                        .io()
                        .newOutputFile(
                            ops.metadataFileLocation(FileFormat.AVRO.addExtension(prefix + count[0]++))),
                    null,
                    writerProperties),
            targetSize);
    ObjectMapper mapper = JsonUtil.mapper();
    List<ManifestFile> manifests;
    long read = 0;
    try (Stream<String> lines = nonEmptyLines(linesFile)) {
      try {
        for (String line : (Iterable<String>) lines::iterator) {
          ContentFile<?> file = parse(mapper, line, spec);
          if (!(file instanceof DataFile dataFile)) {
            throw new IllegalArgumentException("not a data file: " + abbreviate(line));
          }
          writer.add(dataFile);
          summary.addedFile(spec, dataFile);
          read++;
        }
        if (read != expectedFiles) {
          throw new IllegalStateException(
              "the data file lines ended after " + read + " of " + expectedFiles + " files");
        }
      } finally {
        writer.close();
      }
      manifests = writer.toManifestFiles();
    } catch (IOException | RuntimeException e) {
      for (int written = 0; written < count[0]; written++) {
        table
            .io()
            .deleteFile(ops.metadataFileLocation(FileFormat.AVRO.addExtension(prefix + written)));
      }
      throw e;
    }
    appended.addAll(manifests);
    return manifests;
  }

  /** The Avro settings Iceberg's own manifest writer takes from the table (its manifest codec). */
  private static Map<String, String> manifestWriterProperties(TableMetadata metadata) {
    Map<String, String> properties = new HashMap<>();
    properties.put(
        TableProperties.AVRO_COMPRESSION,
        metadata.property(
            TableProperties.MANIFEST_COMPRESSION, TableProperties.MANIFEST_COMPRESSION_DEFAULT));
    String level =
        metadata.property(
            TableProperties.MANIFEST_COMPRESSION_LEVEL,
            TableProperties.MANIFEST_COMPRESSION_LEVEL_DEFAULT);
    if (level != null) {
      properties.put(TableProperties.AVRO_COMPRESSION_LEVEL, level);
    }
    return properties;
  }

  /**
   * Writes the live delete files of a snapshot to the local file {@code outFile}, one {@link
   * ContentFileParser} JSON per line; returns how many.
   */
  public static int writeDeleteFiles(Table table, long snapshotId, String outFile) throws IOException {
    Snapshot snapshot = table.snapshot(snapshotId);
    if (snapshot == null) {
      throw new IllegalArgumentException("no snapshot " + snapshotId + " in " + table.name());
    }
    Map<Integer, PartitionSpec> specs = table.specs();
    int written = 0;
    try (BufferedWriter out = Files.newBufferedWriter(Path.of(outFile), StandardCharsets.UTF_8)) {
      for (ManifestFile manifest : snapshot.deleteManifests(table.io())) {
        try (ManifestReader<DeleteFile> reader =
            ManifestFiles.readDeleteManifest(manifest, table.io(), specs)) {
          for (DeleteFile file : reader) {
            out.write(ContentFileParser.toJson(file, specs.get(file.specId())));
            out.write('\n');
            written++;
          }
        }
      }
    }
    return written;
  }

  /** The locations of a delete manifest's live delete files, one per line. */
  public static String deleteFileLocations(Table table, ManifestFile manifest) {
    StringBuilder out = new StringBuilder();
    try (ManifestReader<DeleteFile> reader =
        ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) {
      for (DeleteFile file : reader) {
        out.append(file.location()).append('\n');
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  /**
   * The non-empty lines of the local file {@code linesFile}, read lazily (a version of 100,000 files
   * never becomes one string on either side of py4j); close the stream when done. Through one reader,
   * opened once: {@code Files.lines} opens a file twice when it cannot size it (a FIFO), and a writer
   * that has written all and closed between the two opens would leave the second waiting for ever.
   */
  private static Stream<String> nonEmptyLines(String linesFile) throws IOException {
    BufferedReader reader = Files.newBufferedReader(Path.of(linesFile), StandardCharsets.UTF_8);
    return reader
        .lines()
        .filter(line -> !line.isEmpty())
        .onClose(
            () -> {
              try {
                reader.close();
              } catch (IOException e) {
                throw new UncheckedIOException(e);
              }
            });
  }

  private static ContentFile<?> parse(ObjectMapper mapper, String json, PartitionSpec spec) {
    try {
      JsonNode node = mapper.readTree(json);
      nonFiniteFloatsAsNumbers(node.get("partition"), spec);
      return ContentFileParser.fromJson(node, spec);
    } catch (IOException e) {
      throw new UncheckedIOException("unreadable content file JSON: " + abbreviate(json), e);
    }
  }

  /**
   * A NaN or infinite float or double partition value made a number again. Iceberg's own JSON writes it
   * as a string ({@code "NaN"}, {@code "Infinity"}, {@code "-Infinity"}: Jackson's generator quotes
   * numbers JSON has no literal for) but {@code SingleValueParser} reads only numbers, so the mirror
   * writes such a value as Iceberg does and it is read here, for the partition tuple in either of
   * the forms {@code ContentFileParser} reads (an array in spec order, or an object by field id).
   */
  private static void nonFiniteFloatsAsNumbers(JsonNode partition, PartitionSpec spec) {
    if (partition == null) {
      return;
    }
    List<Types.NestedField> fields = spec.partitionType().fields();
    for (int i = 0; i < fields.size(); i++) {
      Types.NestedField field = fields.get(i);
      Type.TypeID type = field.type().typeId();
      if (type != Type.TypeID.FLOAT && type != Type.TypeID.DOUBLE) {
        continue;
      }
      if (partition instanceof ArrayNode array && i < array.size()) {
        Double number = nonFinite(array.get(i));
        if (number != null) {
          array.set(i, DoubleNode.valueOf(number));
        }
      } else if (partition instanceof ObjectNode object) {
        String key = String.valueOf(field.fieldId());
        Double number = nonFinite(object.get(key));
        if (number != null) {
          object.set(key, DoubleNode.valueOf(number));
        }
      }
    }
  }

  private static Double nonFinite(JsonNode value) {
    if (value == null || !value.isTextual()) {
      return null;
    }
    switch (value.textValue()) {
      case "NaN":
        return Double.NaN;
      case "Infinity":
        return Double.POSITIVE_INFINITY;
      case "-Infinity":
        return Double.NEGATIVE_INFINITY;
      default:
        return null;
    }
  }

  private static String abbreviate(String text) {
    return text.length() <= 200 ? text : text.substring(0, 200) + "…";
  }
}
